"""The ``ws`` source against a real local ``websockets`` server: frames, drops,
reconnects with backoff, headers, the frame cap."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from websockets.asyncio.server import Server, ServerConnection, serve

from reconciler import errors, sources
from reconciler.model import Observation
from reconciler.sources import ws
from reconciler.sources.context import SourceContext
from tests.factories import monitor


class Frames:
    """A local server: each connection gets ``script`` (frames), then is dropped."""

    def __init__(self, script: list[str | bytes]) -> None:
        self.script = script
        self.headers: list[str | None] = []
        self.server: Server | None = None
        self.port = 0

    async def handler(self, conn: ServerConnection) -> None:
        self.headers.append(conn.request.headers.get("Authorization") if conn.request else None)
        for frame in self.script:
            await conn.send(frame)
        await conn.close(1001, "going away")

    async def start(self) -> None:
        self.server = await serve(self.handler, "127.0.0.1", self.port)
        self.port = next(iter(self.server.sockets)).getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


async def take(items: AsyncGenerator[sources.StreamItem, None], n: int) -> list[Any]:
    out = []
    async with asyncio.timeout(20):
        while len(out) < n:
            out.append(await anext(items))
    return out


def test_frames_drop_and_reconnect_with_backoff() -> None:
    delays: list[float] = []
    server = Frames(["one", b"\x00\x01", '{"status": "red"}'])

    async def sleep(seconds: float) -> None:
        delays.append(seconds)
        if len(delays) == 2:  # down for a while: restore the server on the same port
            await server.start()
        await asyncio.sleep(0.01)

    async def go() -> None:
        await server.start()
        m = monitor({"type": "ws", "url": f"ws://127.0.0.1:{server.port}/",
                     "headers": {"Authorization": "Bearer ${WS_TOKEN}"}})
        ctx = SourceContext.create()
        ctx.environ = {"WS_TOKEN": "tok-123"}
        items = ws.stream(m, ctx, sleep=sleep, rand=lambda: 0.5)
        try:
            first = await take(items, 5)
            assert isinstance(first[0], sources.Connected)
            assert first[1] == Observation("one", {"binary": False})
            assert first[2].text == base64.b64encode(b"\x00\x01").decode()
            assert first[2].meta["binary"] is True
            assert first[3].text == '{"status": "red"}'
            assert isinstance(first[4], errors.SourceError) and "1001" in str(first[4])
            await server.stop()  # the connection is lost and the server is gone
            down = await take(items, 1)
            assert isinstance(down[0], errors.SourceError) and down[0].kind == "connect"
            back = await take(items, 2)
            assert isinstance(back[0], sources.Connected)
            assert back[1].text == "one"
        finally:
            await items.aclose()
            await ctx.aclose()
            await server.stop()
        assert server.headers[0] == "Bearer tok-123"
        assert "tok-123" in ctx.redactor.secrets

    asyncio.run(go())
    # exponential: 0.5 * base * 2**attempt with rand() = 0.5
    assert delays[:2] == [0.5, 1.0]


def test_frame_over_max_bytes_drops_the_connection() -> None:
    server = Frames(["x" * 5000])

    async def go() -> None:
        await server.start()
        m = monitor({"type": "ws", "url": f"ws://127.0.0.1:{server.port}/",
                     "maxBytes": 1000})
        ctx = SourceContext.create()

        async def sleep(_: float) -> None:
            await asyncio.sleep(0.01)

        items = ws.stream(m, ctx, sleep=sleep, rand=lambda: 0.0)
        try:
            got = await take(items, 2)
            assert isinstance(got[0], sources.Connected)
            assert isinstance(got[1], errors.SourceError)
            assert got[1].kind == "frame-too-large" and "maxBytes" in str(got[1])
        finally:
            await items.aclose()
            await ctx.aclose()
            await server.stop()

    asyncio.run(go())


def test_select_applies_to_frames() -> None:
    spec = ws.normalize({"type": "ws", "url": "ws://h/", "select": "status"})
    assert ws.frame_observation(spec, '{"status": "ok"}').text == "ok"
    with pytest.raises(errors.SourceError) as info:
        ws.frame_observation(spec, "not json")
    assert info.value.kind == "select"


@pytest.mark.parametrize(("attempt", "rand", "want"), [
    (0, 1.0, 1.0), (1, 1.0, 2.0), (3, 0.5, 4.0), (10, 1.0, 60.0), (50, 1.0, 60.0),
    (0, 0.0, 0.1),
])
def test_backoff_is_exponential_with_full_jitter(attempt: int, rand: float,
                                                 want: float) -> None:
    assert ws.backoff_delay(attempt, 1.0, lambda: rand) == want
