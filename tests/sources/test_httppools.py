"""sources.httppools: each HTTP worker sends through its own connection pool."""

from __future__ import annotations

import asyncio
import http.server

from reconciler.sources import http
from reconciler.sources import workers as workers_mod
from reconciler.sources.context import SourceContext
from tests.factories import monitor
from tests.helpers import http_server, reply


def port(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 200, str(h.client_address[1]).encode())  # the client's end of the connection


def test_a_worker_never_gets_a_connection_another_worker_opened() -> None:
    async def go(base: str) -> tuple[dict[int, str], str]:
        ctx = SourceContext.create(http_in_flight=2)
        seen: dict[int, str] = {}
        first_done, release = asyncio.Event(), asyncio.Event()

        async def get(hold: bool) -> None:
            current = workers_mod.current()
            assert current is not None and current[0] is ctx.http_workers
            seen[current[1]] = (await ctx.http.get(base + "/port")).text
            if hold:  # this worker stays busy; its connection is idle in the pool
                first_done.set()
                await release.wait()

        try:
            holding = asyncio.ensure_future(ctx.http_workers.run(get, True))
            await first_done.wait()
            await ctx.http_workers.run(get, False)  # the other worker
            release.set()
            await holding
            outside = (await ctx.http.get(base + "/port")).text  # not in a worker
            return seen, outside
        finally:
            await ctx.aclose()

    with http_server({"/port": port}) as base:
        seen, outside = asyncio.run(go(base))
    # one pool shared by the workers would have handed the second worker the first
    # one's idle connection
    assert sorted(seen) == [0, 1]
    assert seen[0] != seen[1]
    assert outside not in seen.values()


def test_polls_at_a_low_rate_reuse_one_kept_alive_connection() -> None:
    # The most recently idle worker takes the next poll, so polls that come one at a
    # time keep using its connection instead of each worker opening its own.
    async def go(base: str) -> set[str]:
        ctx = SourceContext.create()  # 25 workers
        probe = monitor({"type": "poll-http", "url": base + "/port", "interval": "30s"})
        try:
            return {(await http.observe(probe, ctx)).text for _ in range(5)}
        finally:
            await ctx.aclose()

    with http_server({"/port": port}) as base:
        ports = asyncio.run(go(base))
    assert len(ports) == 1
