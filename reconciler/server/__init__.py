"""The daemon's network face: one HTTP server (aiohttp) in the daemon's event loop.

``options`` reads ``[http]`` of monitors.toml; ``app`` is the server (bearer-token
authentication, request limits, JSON errors, redaction) and the ``Route`` shape;
``routes`` is the registry of route modules (``health``, ``v1``, ``metrics``,
``page``), each a ``ROUTES`` tuple; another module adds routes by adding its module
there (webhook receivers authenticate by signature with ``auth="self"``).

It sits above ``daemon`` and ``client``: it serves the daemon's state through the
same read models the CLI uses (``client.views``) and the daemon's own ``status``.
Only ``cli`` imports it (``monitors run`` attaches it with ``Daemon.serve``); it
must not import ``cli``.
"""
