"""``server.admission``: at most ``MAX_ACTIVE`` requests run their handler and answer on
the event loop at once, within a loop-time budget; the rest wait their turn; the probes
never wait.

In-process (the real aiohttp server on a loopback port, real HTTP clients) with
routes of the test's own: a real daemon cannot be given a handler that blocks."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from aiohttp import web

from reconciler import redaction
from reconciler.server import admission, app
from reconciler.server.admission import Admission
from reconciler.server.options import DEFAULT_TIMEOUT, HttpOptions
from tests.helpers import FakeClock

TOKEN = "test-token-0123456789abcdef"


def _server(*routes: app.Route, timeout: float = DEFAULT_TIMEOUT) -> app.HttpServer:
    """A real server on a loopback port serving ``routes`` and ``GET /small``."""
    daemon: Any = SimpleNamespace(redactor=redaction.Redactor(),
                                  operations=SimpleNamespace(endpoints={}))
    return app.HttpServer(daemon, HttpOptions(listen="127.0.0.1:0", timeout=timeout), TOKEN,
                          routes=[*routes, app.Route("GET", "/small", _small)])


async def _small(request: web.Request) -> web.StreamResponse:
    return app.context(request).json({"ok": True})


async def _small_beside(server: app.HttpServer, requests: list[bytes], *, read: bool,
                        ready: Callable[[], Awaitable[None]]) -> int:
    """Start ``server``, send each raw request on a connection of its own (reading
    nothing of the answers unless ``read``), await ``ready()``, then the status of a
    ``GET /small``; the connections are aborted at the end."""
    await server.start()
    stalled: list[asyncio.StreamWriter] = []
    try:
        host, port = str(server.url).removeprefix("http://").rsplit(":", 1)
        for raw in requests:
            _, writer = await asyncio.open_connection(host, int(port), limit=1024)
            if not read:
                writer.transport.pause_reading()
            writer.write(raw)
            stalled.append(writer)
        await ready()
        async with httpx.AsyncClient(base_url=str(server.url), timeout=10, headers={
                "Authorization": f"Bearer {TOKEN}"}) as client:
            return (await client.get("/small")).status_code
    finally:
        for writer in stalled:
            writer.transport.abort()
        await server.close()


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

    server = _server(app.Route("GET", "/slow", slow),
                     app.Route("GET", "/probe", probe, auth="open"))

    async def go() -> tuple[list[int], int]:
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=str(server.url), timeout=10, headers={
                    "Authorization": f"Bearer {TOKEN}"}) as client:
                many = [asyncio.ensure_future(client.get("/slow"))
                        for _ in range(3 * admission.MAX_ACTIVE)]
                while active["now"] < admission.MAX_ACTIVE:  # bounded by the test's timeout
                    await asyncio.sleep(0.01)
                probed = (await client.get("/probe")).status_code  # while all are busy
                await asyncio.sleep(0.1)  # a chance for a seventh handler to start
                release.set()
                return [r.status_code for r in await asyncio.gather(*many)], probed
        finally:
            await server.close()

    statuses, probed = asyncio.run(go())
    assert statuses == [200] * (3 * admission.MAX_ACTIVE)
    assert probed == 200
    assert active["most"] == admission.MAX_ACTIVE


def test_sustained_requests_get_the_loop_share_and_a_burst_goes_through_at_once() -> None:
    """The budget: turns totalling ``burst`` seconds go through at once; past it, a turn
    waits until ``share`` of the elapsed time pays for what was spent (token bucket)."""
    clock = FakeClock()

    async def go() -> list[float]:
        gate = Admission(slots=1, share=0.25, burst=0.05, clock=clock, cpu=clock.monotonic)
        admitted: list[float] = []

        async def request() -> None:
            async with gate.turn():
                admitted.append(clock.now)
                clock.now += 0.04  # 40 ms on the loop

        tasks = [asyncio.ensure_future(request()) for _ in range(4)]
        for _ in range(100):  # virtual time; bounded
            await clock.advance(0.01)
            if all(t.done() for t in tasks):
                break
        assert gate.waited >= 2
        return [round(t - admitted[0], 3) for t in admitted]

    starts = asyncio.run(go())
    # 1st: bucket 0.05 -> 0.02 (charged 0.04, refilled 0.01 meanwhile); the 2nd goes at
    # once (bucket >= 0) and leaves it at -0.01: the 3rd waits 0.04 s for it to refill
    # and leaves it at -0.03; from then on each 40 ms turn waits 120 ms (the share)
    assert starts == pytest.approx([0.0, 0.04, 0.12, 0.28])


def test_overlapping_turns_are_charged_once_and_a_waiter_cancelled_pays_nothing() -> None:
    clock = FakeClock()

    async def go() -> tuple[float, int]:
        gate = Admission(slots=4, share=0.5, burst=1.0, clock=clock, cpu=clock.monotonic)
        release = asyncio.Event()

        async def request() -> None:
            async with gate.turn():
                await release.wait()

        tasks = [asyncio.ensure_future(request()) for _ in range(4)]
        await asyncio.sleep(0)
        clock.now += 0.4  # four turns overlap for 0.4 s: 0.4 s of loop time, not 1.6
        release.set()
        await asyncio.gather(*tasks)
        gate._account()
        return gate._tokens, gate.waited

    tokens, waited = asyncio.run(go())
    assert tokens == pytest.approx(1.0 - 0.4 + 0.4 * 0.5)
    assert waited == 0


def test_clients_that_never_read_their_answer_do_not_hold_the_turns() -> None:
    """A turn ends once the answer is handed to the connection: waiting for a slow (or
    stalled) client to read it would let ``MAX_ACTIVE`` such clients hold every turn
    until ``requestTimeout``."""
    big = b"x" * (8 << 20)  # far more than the kernel's socket buffers take
    handled = {"huge": 0}

    async def huge(request: web.Request) -> web.StreamResponse:
        handled["huge"] += 1
        return web.Response(body=big, content_type="application/octet-stream")

    async def every_turn_taken() -> None:
        while handled["huge"] < admission.MAX_ACTIVE:  # (bounded by the test's timeout)
            await asyncio.sleep(0.01)

    get = f"GET /huge HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    server = _server(app.Route("GET", "/huge", huge), timeout=120)
    assert asyncio.run(_small_beside(server, [get.encode()] * (admission.MAX_ACTIVE + 1),
                                     read=False, ready=every_turn_taken)) == 200


def test_clients_that_send_their_body_slowly_do_not_hold_the_turns() -> None:
    """Bodies are read before the turn (at most ``MAX_UPLOADS`` at once): clients that
    declare a body and send one byte of it delay other uploads, never a ``GET``."""
    async def upload(request: web.Request) -> web.StreamResponse:
        return app.context(request).json({"size": len(await request.read())})

    async def parsed() -> None:
        await asyncio.sleep(0.2)  # their requests are parsed and waiting for bodies

    post = (f"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\nx")
    server = _server(app.Route("POST", "/upload", upload), timeout=120)
    statuses = asyncio.run(_small_beside(
        server, [post.encode()] * (app.MAX_UPLOADS + admission.MAX_ACTIVE), read=True,
        ready=parsed))
    assert statuses == 200  # at once, not after the stalled uploads' timeout



def test_a_timeout_while_the_answer_goes_out_drops_the_connection_without_a_second_answer(
        ) -> None:
    """A client reading too slowly for ``requestTimeout`` once the status line of its
    answer went out: the connection is dropped. Answering 503 then appended a second
    status line after the first answer's body on the same connection."""
    big = b"x" * (8 << 20)  # far more than the kernel's socket buffers take

    async def huge(request: web.Request) -> web.StreamResponse:
        return web.Response(body=big, content_type="application/octet-stream")

    async def go() -> bytes:
        server = _server(app.Route("GET", "/huge", huge), timeout=0.5)
        await server.start()
        try:
            host, port = str(server.url).removeprefix("http://").rsplit(":", 1)
            sock = socket.create_connection((host, int(port)))
            sock.setblocking(False)
            sock.sendall(f"GET /huge HTTP/1.1\r\nHost: x\r\n"
                         f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
            await asyncio.sleep(1.5)  # past requestTimeout, reading nothing
            loop = asyncio.get_running_loop()
            received = bytearray()
            async with asyncio.timeout(20):  # what arrived before the drop, then the reset
                with contextlib.suppress(ConnectionResetError):
                    while chunk := await loop.sock_recv(sock, 1 << 20):
                        received += chunk
            sock.close()
            return bytes(received)
        finally:
            await server.close()

    received = asyncio.run(go())
    assert received.startswith(b"HTTP/1.1 200")
    assert received.count(b"HTTP/1.1 ") == 1 and b"503" not in received[:200]
    assert len(received) < len(big)  # dropped, not finished


def test_cpu_spent_for_requests_by_another_thread_is_charged_too() -> None:
    """The sender thread (``server.sendout``) writes answers after their turn: its CPU
    time is charged to the budget all the same, turn or not."""
    clock = FakeClock()

    async def go() -> float:
        sender_cpu = {"s": 0.0}
        gate = Admission(slots=1, share=0.5, burst=0.1, clock=clock, cpu=lambda: 0.0,
                         also=lambda: sender_cpu["s"])
        sender_cpu["s"] += 0.6  # outside any turn: the 0.1 of burst, and 0.5 owed
        admitted: list[float] = []

        async def request() -> None:
            async with gate.turn():
                admitted.append(clock.now)

        started = clock.now
        task = asyncio.ensure_future(request())
        for _ in range(300):  # virtual time; bounded
            await clock.advance(0.01)
            if task.done():
                break
        return admitted[0] - started

    assert asyncio.run(go()) == pytest.approx(1.0, abs=0.011)  # 0.5 owed at 0.5 per s
