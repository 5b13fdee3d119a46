"""API v1: JSON over HTTP for clients and peers (README, "The HTTP API"). Bearer token.

==========================  =========================================================
``GET /v1/status``          the control socket's ``status`` reply (``daemon.protocol``)
``GET /v1/monitors``        the rows of ``list --json`` (``client.views.rows``)
``GET /v1/monitors/{name}`` one monitor in full (``client.views.view``); 404 unknown
``GET /v1/monitors/{name}/runs?limit=N``  its fire history, newest first (default 20)
``GET /v1/fingerprints``    ``[{name, fingerprint, scope, owner, status}]`` (duplicate checks)
``POST /v1/plan``           ``{"monitors": [monitor JSON]}`` (a desired set, the
                            running registry's monitor shape) -> the plan for this
                            device's running set, and that running set
==========================  =========================================================

Every answer carries ``apiVersion`` and ``device``. Handlers reuse the cores the
CLI uses; the slow ones (the layers read by ``views``) run in a thread.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from reconciler import errors, timestamps
from reconciler.server.app import Route, context, error

MAX_RUNS = 1000


async def status(request: web.Request) -> web.StreamResponse:
    """The daemon's ``status`` (the same reply as the control socket's)."""
    ctx = context(request)
    return ctx.json(ctx.status())


async def monitors(request: web.Request) -> web.StreamResponse:
    """``list --json``'s document for this device."""
    ctx = context(request)

    body = await ctx.rows_json()  # made in the helper process (server.offload)
    return web.Response(body=body, content_type="application/json", charset="utf-8")


async def monitor(request: web.Request) -> web.StreamResponse:
    """``view NAME --json``; 404 when no layer defines it and it does not run."""
    from reconciler.client import views

    ctx = context(request)
    name = request.match_info["name"]
    try:
        doc = await asyncio.to_thread(views.view, ctx.daemon.cfg, name, status=ctx.status())
    except errors.NotFoundError as e:
        return error(request, 404, str(e))
    return ctx.json({"device": ctx.daemon.cfg.device, "monitor": doc})


async def runs(request: web.Request) -> web.StreamResponse:
    """``runs NAME --json``: fire records, newest first (``?limit=``, 1-1000, default 20)."""
    from reconciler.client import views

    ctx = context(request)
    name = request.match_info["name"]
    raw = request.query.get("limit", "20")
    if not raw.isdigit() or not 0 < int(raw) <= MAX_RUNS:
        return error(request, 400, f"limit: expected a whole number 1-{MAX_RUNS}")
    try:
        fires = await asyncio.to_thread(views.runs, ctx.daemon.cfg, name, limit=int(raw))
    except errors.NotFoundError as e:
        return error(request, 404, str(e))
    return ctx.json({"device": ctx.daemon.cfg.device, "monitor": name, "runs": fires})


async def fingerprints(request: web.Request) -> web.StreamResponse:
    """Every monitor known here with its fingerprint (``add``'s fleet duplicate check)."""
    ctx = context(request)
    rows = await ctx.rows()
    return ctx.json({"device": ctx.daemon.cfg.device, "fingerprints": [
        {k: r.get(k) for k in ("name", "fingerprint", "scope", "owner", "status")}
        for r in rows["monitors"]]})


async def plan(request: web.Request) -> web.StreamResponse:
    """A desired set in, the plan against this daemon's running set out."""
    from reconciler.planning import desired as desired_mod
    from reconciler.planning import plan as plan_mod
    from reconciler.state import registry as registry_mod

    ctx = context(request)
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as e:
        return error(request, 400, f"bad request: the body is not JSON ({e})")
    docs = body.get("monitors") if isinstance(body, dict) else None
    if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
        return error(request, 400, 'bad request: expected {"monitors": [monitor, ...]}')
    try:
        wanted = {m.name: m for m in (registry_mod.monitor_from_json(d) for d in docs)}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return error(request, 400, f"bad request: not a monitor: {type(e).__name__}: {e}")
    reg = ctx.daemon.registry
    running = {n: e.monitor for n, e in reg.entries.items()}
    basis = plan_mod.Basis(
        device=ctx.daemon.cfg.device, daemon_running=True, daemon_pid=reg.pid,
        generation=reg.generation, digest=reg.digest, commit=reg.commit, dirty=reg.dirty,
        created_at=timestamps.utc_seconds(), root=ctx.daemon.cfg.root)
    made = plan_mod.make(desired_mod.Desired(monitors=wanted, excluded={}, invalid={}),
                         running, basis)
    out: dict[str, Any] = {"device": ctx.daemon.cfg.device, "plan": made.to_json(),
                           "running": [registry_mod.monitor_to_json(m)
                                       for _, m in sorted(running.items())]}
    return ctx.json(out)


ROUTES = (
    Route("GET", "/v1/status", status),
    Route("GET", "/v1/monitors", monitors),
    Route("GET", "/v1/monitors/{name}", monitor),
    Route("GET", "/v1/monitors/{name}/runs", runs),
    Route("GET", "/v1/fingerprints", fingerprints),
    Route("POST", "/v1/plan", plan),
)
