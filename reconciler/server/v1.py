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
CLI uses; the heavy ones (every monitor's rows, the plan) are made in the view helper
process (``server.jobs``), one monitor's view and runs in a thread.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from reconciler import errors
from reconciler.server import jobs
from reconciler.server.app import Route, context, error

MAX_RUNS = 1000


async def status(request: web.Request) -> web.StreamResponse:
    """The daemon's ``status`` (the same reply as the control socket's)."""
    ctx = context(request)
    return ctx.json(ctx.status())


async def monitors(request: web.Request) -> web.StreamResponse:
    """``list --json``'s document for this device."""
    ctx = context(request)

    body = await ctx.view(jobs.rows_json)  # made in the helper process
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
    body = await context(request).view(jobs.fingerprints_json)  # in the helper process
    return web.Response(body=body, content_type="application/json", charset="utf-8")


async def plan(request: web.Request) -> web.StreamResponse:
    """A desired set in, the plan against this daemon's running set out (parsed and
    planned in the helper process, ``server.jobs.plan_json``)."""
    ctx = context(request)
    status, body = await ctx.offload.run(jobs.plan_json, ctx.daemon.cfg, await request.read(),
                                         ctx.redactor.secrets)
    return web.Response(body=body, status=status, content_type="application/json",
                        charset="utf-8")


ROUTES = (
    Route("GET", "/v1/status", status),
    Route("GET", "/v1/monitors", monitors),
    Route("GET", "/v1/monitors/{name}", monitor),
    Route("GET", "/v1/monitors/{name}/runs", runs),
    Route("GET", "/v1/fingerprints", fingerprints),
    Route("POST", "/v1/plan", plan),
)
