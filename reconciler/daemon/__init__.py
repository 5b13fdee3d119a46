"""The daemon process: evaluators, the scheduler, supervision, file watching and control.

``main`` is the life cycle (lock, signals, the wait loop, stop); ``parts`` builds its
collaborators; ``reconcile`` turns a snapshot into a plan the ``supervisor`` applies;
``operations`` answers control requests that ``control`` serves over the typed
``protocol``. ``evaluator.Engine`` turns running monitors into polls (observe, decide,
persist, dispatch) on one heap-ordered ``scheduler.Scheduler``. Nothing here parses
YAML or renders output; nothing here uses click; the CLI's side of the daemon (sending
requests, apply, stop, list/view) is ``reconciler.client``.
"""
