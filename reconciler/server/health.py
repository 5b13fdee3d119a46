"""``GET /healthz`` and ``GET /readyz``: open (no token), for probes and the ``device`` source.

``/healthz``: 200 while the daemon answers, with this device's name and headroom
bucket (``sources.device.headroom``: disk free under the state directory, load
per CPU)::

    {"apiVersion": "v1", "status": "ok", "device": "laptop",
     "headroom": "ok", "figures": {"diskFree": 0.41, "loadPerCpu": 0.12}}

``/readyz``: 200 once the first reconcile ran (``{"ready": true}``), else 503.
Neither answer names a monitor, a path or a secret.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from reconciler.server.app import Route, context


async def healthz(request: web.Request) -> web.StreamResponse:
    """Liveness plus the headroom bucket."""
    from reconciler.sources import device

    ctx = context(request)
    bucket, figures = await asyncio.to_thread(device.headroom, ctx.daemon.cfg.state_dir)
    return ctx.json({"status": "ok", "device": ctx.daemon.cfg.device, "headroom": bucket,
                     "figures": figures})


async def readyz(request: web.Request) -> web.StreamResponse:
    """Ready once the first reconcile ran."""
    ctx = context(request)
    ready = bool(ctx.daemon.reconciler.last.at)
    return ctx.json({"ready": ready}, status=200 if ready else 503)


ROUTES = (
    Route("GET", "/healthz", healthz, auth="open"),
    Route("GET", "/readyz", readyz, auth="open"),
)
