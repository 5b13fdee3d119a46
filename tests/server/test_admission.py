"""``server.app``'s admission: at most ``MAX_ACTIVE`` requests run their handler and
answer on the event loop at once; the rest wait their turn; the probes never wait.

In-process (the real aiohttp server on a loopback port, real HTTP clients) with
routes of the test's own: a real daemon cannot be given a handler that blocks."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx
from aiohttp import web

from reconciler import redaction
from reconciler.server import app
from reconciler.server.options import HttpOptions

TOKEN = "test-token-0123456789abcdef"


def test_at_most_max_active_requests_run_at_once_and_probes_never_wait() -> None:
    active = {"now": 0, "most": 0}
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        active["now"] += 1
        active["most"] = max(active["most"], active["now"])
        await release.wait()
        active["now"] -= 1
        return app.context(request).json({"ok": True})

    async def probe(request: web.Request) -> web.StreamResponse:
        return app.context(request).json({"ok": True})

    daemon: Any = SimpleNamespace(redactor=redaction.Redactor(),
                                  operations=SimpleNamespace(endpoints={}))
    server = app.HttpServer(daemon, HttpOptions(listen="127.0.0.1:0"), TOKEN, routes=[
        app.Route("GET", "/slow", slow), app.Route("GET", "/probe", probe, auth="open")])

    async def go() -> tuple[list[int], int]:
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=str(server.url), timeout=10, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as client:
                many = [asyncio.ensure_future(client.get("/slow"))
                        for _ in range(3 * app.MAX_ACTIVE)]
                while active["now"] < app.MAX_ACTIVE:  # bounded by the test's timeout
                    await asyncio.sleep(0.01)
                probed = (await client.get("/probe")).status_code  # while all are busy
                await asyncio.sleep(0.1)  # a chance for a seventh handler to start
                release.set()
                return [r.status_code for r in await asyncio.gather(*many)], probed
        finally:
            await server.close()

    statuses, probed = asyncio.run(go())
    assert statuses == [200] * (3 * app.MAX_ACTIVE)
    assert probed == 200
    assert active["most"] == app.MAX_ACTIVE
