"""``server.sendout``: large answers' bodies are written by the sender thread, intact and
in order on a keep-alive connection; small answers and TLS go out the usual way; a
client leaving mid-answer costs nothing but its connection.

In-process (the real aiohttp server on a loopback port, real HTTP clients)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from aiohttp import web

from reconciler import redaction
from reconciler.server import app, sendout
from reconciler.server.options import HttpOptions
from tests.helpers import self_signed

TOKEN = "test-token-0123456789abcdef"
BIG = os.urandom(6 << 20)  # more than the kernel's socket buffers take at once
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _big(request: web.Request) -> web.StreamResponse:
    return web.Response(body=BIG, content_type="application/octet-stream")


async def _small(request: web.Request) -> web.StreamResponse:
    return app.context(request).json({"ok": True})


def _server(tmp_path: Path | None = None) -> app.HttpServer:
    daemon: Any = SimpleNamespace(redactor=redaction.Redactor(),
                                  operations=SimpleNamespace(endpoints={}))
    options = HttpOptions(listen="127.0.0.1:0")
    if tmp_path is not None:
        cert, key = self_signed(tmp_path)
        options = HttpOptions(listen="127.0.0.1:0", cert_file=cert, key_file=key)
    return app.HttpServer(daemon, options, TOKEN, routes=[
        app.Route("GET", "/big", _big), app.Route("GET", "/small", _small)])


def _serve(check: Callable[[app.HttpServer], Awaitable[None]],
           server: app.HttpServer) -> None:
    """Start ``server``, await ``check(server)``, then close the server (failing too)."""
    async def go() -> None:
        await server.start()
        try:
            await check(server)
        finally:
            await server.close()

    asyncio.run(go())


def test_a_large_body_goes_by_the_thread_intact_and_in_order_on_one_connection() -> None:
    async def check(server: app.HttpServer) -> None:
        limits = httpx.Limits(max_connections=1)  # one keep-alive connection
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     limits=limits, timeout=30) as client:
            for path in ("/big", "/small", "/big", "/small"):
                answer = await client.get(path)
                assert answer.status_code == 200
                if path == "/big":
                    assert hashlib.sha256(answer.content).digest() == \
                        hashlib.sha256(BIG).digest()
                    assert answer.headers["Content-Length"] == str(len(BIG))
                else:
                    assert answer.json()["ok"] is True
        assert server.ctx.sender.sent == 2  # the two large bodies, not the small ones

    _serve(check, _server())


def test_many_clients_get_their_large_answers_at_once_whatever_their_pace() -> None:
    async def slow_reader(host: str, port: int) -> bytes:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 16)
        writer.write(f"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        got = bytearray()
        while chunk := await reader.read(1 << 16):
            got += chunk
            await asyncio.sleep(0.001)  # a slow reader beside fast ones
        writer.close()
        return bytes(got)

    async def check(server: app.HttpServer) -> None:
        host, port = str(server.url).removeprefix("http://").rsplit(":", 1)
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=60) as client:
            fast = [client.get("/big") for _ in range(6)]
            slow = [slow_reader(host, int(port)) for _ in range(2)]
            answers = await asyncio.gather(*fast, *slow)
        for answer in answers[:6]:
            assert isinstance(answer, httpx.Response) and answer.content == BIG
        for raw in answers[6:]:
            assert isinstance(raw, bytes) and raw.endswith(BIG)
        assert server.ctx.sender.sent == 8

    _serve(check, _server())


def test_a_client_leaving_mid_answer_costs_its_connection_only(caplog: Any) -> None:
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def check(server: app.HttpServer) -> None:
        host, port = str(server.url).removeprefix("http://").rsplit(":", 1)
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=30) as client:  # the thread's own fds
            assert (await client.get("/big")).content == BIG
        before = fds()
        for _ in range(5):
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the body
            reader, writer = await asyncio.open_connection(sock=sock)  # cannot fit
            writer.write(f"GET /big HTTP/1.1\r\nHost: x\r\n"
                         f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
            await reader.read(1 << 16)  # the answer has begun
            writer.transport.abort()  # ... and the client is gone
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=30) as client:
            assert (await client.get("/big")).content == BIG
        for _ in range(200):  # the thread closes its duplicates (bounded wait)
            if fds() <= before + 1:
                break
            await asyncio.sleep(0.05)
        assert fds() <= before + 1

    _serve(check, _server())
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


def test_tls_answers_go_out_through_the_tls_transport(tmp_path: Path) -> None:
    async def check(server: app.HttpServer) -> None:
        verify = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     verify=verify, timeout=30) as client:
            assert (await client.get("/big")).content == BIG
        assert server.ctx.sender.sent == 0

    _serve(check, _server(tmp_path))


def test_the_thread_stops_with_the_server() -> None:
    async def go() -> sendout.Sender:
        server = _server()
        await server.start()
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=30) as client:
            assert (await client.get("/big")).status_code == 200
        await server.close()
        return server.ctx.sender

    sender = asyncio.run(go())
    assert sender.sent == 1
    assert not [t for t in threading.enumerate() if t.name == "monitors:http-sender"]


def _options_server(**options: Any) -> app.HttpServer:
    daemon: Any = SimpleNamespace(redactor=redaction.Redactor(),
                                  operations=SimpleNamespace(endpoints={}))

    async def sized(request: web.Request) -> web.StreamResponse:
        return web.Response(body=BIG[:int(request.match_info["n"])],
                            content_type="application/octet-stream")

    async def chunked(request: web.Request) -> web.StreamResponse:
        answer = web.Response(body=BIG, content_type="application/octet-stream")
        answer.enable_chunked_encoding()
        return answer

    return app.HttpServer(daemon, HttpOptions(listen="127.0.0.1:0", **options), TOKEN,
                          routes=[app.Route("GET", "/big", _big),
                                  app.Route("GET", "/small", _small),
                                  app.Route("GET", "/sized/{n}", sized),
                                  app.Route("GET", "/chunked", chunked)])


def _request(path: str, *, close: bool = False) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            + ("Connection: close\r\n" if close else "") + "\r\n").encode()


def _answers(raw: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each HTTP/1.1 answer in ``raw``, in order (Content-Length)."""
    found = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = int(next(v for k, _, v in (line.partition(": ") for line in lines[1:])
                          if k.lower() == "content-length"))
        found.append((int(lines[0].split()[1]), rest[:length]))
        raw = rest[length:]
    return found


def _address(server: app.HttpServer) -> tuple[str, int]:
    host, port = str(server.url).removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_pipelined_requests_in_one_packet_are_answered_in_order() -> None:
    async def check(server: app.HttpServer) -> None:
        reader, writer = await asyncio.open_connection(*_address(server))
        writer.write(_request("/big") + _request("/small") + _request("/big")
                     + _request("/small", close=True))  # one write: one packet
        raw = await reader.read(-1)
        writer.close()
        answers = _answers(raw)
        assert [status for status, _ in answers] == [200, 200, 200, 200]
        assert answers[0][1] == BIG and answers[2][1] == BIG
        assert b'"ok": true' in answers[1][1] and b'"ok": true' in answers[3][1]
        assert server.ctx.sender.sent == 2

    _serve(check, _options_server())


def test_a_body_at_the_threshold_goes_by_the_thread_and_one_below_does_not() -> None:
    async def check(server: app.HttpServer) -> None:
        reader, writer = await asyncio.open_connection(*_address(server))
        writer.write(_request(f"/sized/{sendout.THRESHOLD - 1}")
                     + _request(f"/sized/{sendout.THRESHOLD}")
                     + _request("/small", close=True))
        raw = await reader.read(-1)
        writer.close()
        answers = _answers(raw)
        assert [(status, len(body)) for status, body in answers[:2]] == \
            [(200, sendout.THRESHOLD - 1), (200, sendout.THRESHOLD)]
        assert answers[0][1] == BIG[:sendout.THRESHOLD - 1]
        assert answers[1][1] == BIG[:sendout.THRESHOLD]
        assert b'"ok": true' in answers[2][1]
        assert server.ctx.sender.sent == 1  # the one at the threshold only

    _serve(check, _options_server())


def test_a_chunked_answer_goes_out_chunked_by_aiohttp() -> None:
    # The thread writes a body as it is: behind chunked headers the client read the
    # body's first bytes as a chunk size ("illegal chunk header").
    async def check(server: app.HttpServer) -> None:
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=30) as client:
            answer = await client.get("/chunked")
            assert answer.headers["Transfer-Encoding"] == "chunked"
            assert answer.content == BIG
            assert (await client.get("/small")).json()["ok"] is True
        assert server.ctx.sender.sent == 0

    _serve(check, _options_server())


def test_a_client_that_never_reads_is_dropped_at_the_timeout_with_no_second_answer() -> None:
    # Dropped means reset: closed plainly, the megabytes the kernel held for the client
    # trickled out to it for about 100 s after the timeout.
    async def check(server: app.HttpServer) -> None:
        async with httpx.AsyncClient(base_url=str(server.url), headers=AUTH,
                                     timeout=30) as client:  # the thread's own fds
            assert (await client.get("/big")).content == BIG
        before = _fds()
        sock = socket.create_connection(_address(server))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # pipelined: the second answer would follow the first's body
        sock.sendall(_request("/big") + _request("/big"))
        await asyncio.sleep(2.5)  # past requestTimeout, reading nothing
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        raw = bytearray()
        started = time.monotonic()
        with contextlib.suppress(ConnectionResetError):
            while chunk := await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 30):
                raw += chunk
        took = time.monotonic() - started
        sock.close()
        assert took < 5, f"the connection ended {took:.0f} s after the timeout"
        assert raw.count(b"HTTP/1.1 ") <= 1 and b" 503 " not in raw, raw[:200]
        assert len(raw) < len(BIG)
        for _ in range(100):
            if _fds() <= before:
                break
            await asyncio.sleep(0.05)
        assert _fds() <= before

    _serve(check, _options_server(timeout=1.0))


def test_closing_the_server_with_bodies_in_flight_ends_them_without_leaks() -> None:
    async def go() -> tuple[int, int]:
        before = _fds()
        server = _options_server(timeout=30.0)
        await server.start()
        socks = []
        for _ in range(4):  # clients that never read: their bodies stay in flight
            sock = socket.create_connection(_address(server))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(_request("/big"))
            socks.append(sock)
        for _ in range(200):
            if len(server.ctx.sender._jobs) == 4:
                break
            await asyncio.sleep(0.02)
        assert len(server.ctx.sender._jobs) == 4
        started = time.monotonic()
        await server.close()
        took = time.monotonic() - started
        for sock in socks:
            sock.close()
        return before, int(took)

    before, took = asyncio.run(go())
    assert took < 5
    assert not [t for t in threading.enumerate() if t.name == "monitors:http-sender"]
    assert _fds() <= before


def test_a_closed_sender_writes_no_descriptor_and_starts_no_thread() -> None:
    # A wait cancelled after close (its wake-up), or a body handed over once the
    # server stopped: the wake-up pipe's numbers may belong to another file by then.
    async def go() -> None:
        sender = sendout.Sender()
        left, right = socket.socketpair()
        try:
            await sender._send(left.fileno(), b"x" * sendout.THRESHOLD)
            assert right.recv(1 << 20)
            sender.close()
            r, w = os.pipe()  # the lowest free numbers: the wake-up pipe's, reused
            os.set_blocking(r, False)
            try:
                sender._wake()
                with contextlib.suppress(BlockingIOError):
                    assert os.read(r, 16) == b"", "wrote into a descriptor it had closed"
            finally:
                os.close(r)
                os.close(w)
            fds = _fds()
            with pytest.raises(ConnectionResetError):
                await sender._send(left.fileno(), b"x" * sendout.THRESHOLD)
            assert not [t for t in threading.enumerate() if t.name == "monitors:http-sender"]
            assert _fds() == fds
        finally:
            left.close()
            right.close()

    asyncio.run(go())
