"""sources.httppools: each HTTP worker sends through its own connection pool."""

from __future__ import annotations

import asyncio
import http.server

from reconciler.sources import workers as workers_mod
from reconciler.sources.context import SourceContext
from tests.helpers import http_server, reply


def port(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 200, str(h.client_address[1]).encode())  # the client's end of the connection


def test_each_worker_keeps_its_own_connections_and_others_share_one_pool() -> None:
    async def go(base: str) -> tuple[list[tuple[int, str]], str]:
        ctx = SourceContext.create(http_in_flight=2)

        async def get() -> tuple[int, str]:
            current = workers_mod.current()
            assert current is not None and current[0] is ctx.http_workers
            return current[1], (await ctx.http.get(base + "/port")).text

        try:
            seen = [await ctx.http_workers.run(get) for _ in range(6)]
            outside = (await ctx.http.get(base + "/port")).text  # not in a worker
            return seen, outside
        finally:
            await ctx.aclose()

    with http_server({"/port": port}) as base:
        seen, outside = asyncio.run(go(base))
    by_worker: dict[int, set[str]] = {}
    for index, client_port in seen:
        by_worker.setdefault(index, set()).add(client_port)
    # one pool shared by the workers would hand a connection one worker opened to the
    # other, once it is idle; here each keeps (and reuses) its own
    assert sorted(by_worker) == [0, 1]
    assert all(len(ports) == 1 for ports in by_worker.values())
    assert by_worker[0].isdisjoint(by_worker[1])
    assert all(outside not in ports for ports in by_worker.values())
