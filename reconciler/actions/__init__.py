"""Actions: carry out a fire (run, routine, notify, webhook-out) and guard the firehose.

One module per action type (``run``, ``routine``, ``notify``, ``webhook_out``) carrying
all that is known about it: its frozen spec and defaults, ``normalize``/``to_json``
(what the fingerprint hashes), ``describe``, ``preview`` (``monitors test``), its lint
``check``, its ``monitors add`` flag, its crash-recovery kind and ``fire``.
``registry.TYPES`` maps the YAML ``action.type`` to its module; every caller goes
through it. The type modules import only leaves at module level, so ``config`` (lint)
can use the registry without asyncio, httpx or Jinja2; their runtime halves are
``spawn`` (the process of a run or routine), ``jobs`` (overlap: skip, queue,
parallel), ``notifier`` (channel deliveries) and ``webhook_send`` (the HTTP POST),
with ``retry`` the one retry policy of notify and webhook-out.

Also: ``common`` (what the type modules share), ``templating`` (sandboxed Jinja2),
``agents`` (argv templates from ``monitors.toml``), ``options`` (the ``[agents]``,
``[routines]``, ``[channels]``, ``[owner]`` sections), ``records`` (fire-record
statuses and the store seam), ``checks`` (static checks for lint), ``channels``
(channel URL checks and test messages), ``dispatch`` (the real ``events.Dispatcher``),
``guards`` (the ``events.Guard``: rate limit and drought) and ``recovery``
(unfinished fires after a crash).

Wiring (the daemon): ``d = dispatch.build(store, settings.toml, state_dir=...)``;
``g = guards.build(store, d)``; ``await recovery.recover(store, monitors, d)``;
the evaluator gets ``d`` and ``g``; shutdown: ``await d.drain(t)``, ``await d.close()``.

What this package must not do: decide whether to fire (conditions do), write the
monitor's ``state.json`` (the evaluator does), or pass event text through a shell.
The type modules never import each other; ``dispatch`` and ``registry`` compose them.
"""
