"""Actions: carry out a fire (run, routine, notify, webhook-out) and guard the firehose.

One module per action type (``run``, ``routine``, ``notify``, ``webhook_out``), plus
``templating`` (sandboxed Jinja2), ``agents`` (argv templates from ``monitors.toml``),
``options`` (the ``[agents]``, ``[routines]``, ``[channels]``, ``[owner]`` sections),
``records`` (fire-record statuses and the store seam), ``checks`` (static checks
for lint), ``dispatch`` (the real ``events.Dispatcher``), ``guards`` (the
``events.Guard``: rate limit and drought) and ``recovery`` (unfinished fires after
a crash).

Wiring (the daemon): ``d = dispatch.build(store, settings.toml, state_dir=...)``;
``g = guards.build(store, d)``; ``await recovery.recover(store, monitors, d)``;
the evaluator gets ``d`` and ``g``; shutdown: ``await d.drain(t)``, ``await d.close()``.

What this package must not do: decide whether to fire (conditions do), write the
monitor's ``state.json`` (the evaluator does), or pass event text through a shell.
The action modules (``run``, ``routine``, ``notify``, ``webhook_out``) never import
each other; ``dispatch`` composes them.
"""
