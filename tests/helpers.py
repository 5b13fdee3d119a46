"""Shared helpers for engine-side tests: a recording dispatcher, a bounded poll, a fake
clock, loopback HTTP servers. Monitors come from ``tests.factories``."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import http.server
import itertools
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from reconciler.events import Event
from reconciler.model import Monitor


class Recorder:
    """A Dispatcher that records every event (and the state seen on disk at dispatch)."""

    def __init__(self, on_dispatch: Callable[[Monitor, Event], None] | None = None) -> None:
        self.events: list[Event] = []
        self.on_dispatch = on_dispatch

    async def dispatch(self, monitor: Monitor, event: Event) -> None:
        if self.on_dispatch is not None:
            self.on_dispatch(monitor, event)
        self.events.append(event)


async def until(pred: Callable[[], bool], timeout: float = 10.0, step: float = 0.01) -> None:
    """Poll ``pred`` until true (bounded), else fail."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(step)


class FakeClock:
    """A ``daemon.clock.Clock`` whose time moves only when advanced: timing tests of the
    scheduler and the engine run on it instead of sleeping through intervals.

    ``advance`` wakes the sleepers due in order (each sees its own due time);
    ``driving`` advances in small steps in the background (virtual time then runs
    about ``step / pause`` times faster than real time, in order), for code that
    waits with real timeouts (``wait_first_poll``) or does I/O in worker threads.
    """

    def __init__(self, *, start: float = 1000.0, wall: float = 1_750_000_000.0) -> None:
        self.now = start
        self._wall_offset = wall - start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, waking each sleeper at its due time, in order."""
        target = self.now + seconds
        for _ in range(3):  # tasks created meanwhile start sleeping first
            await asyncio.sleep(0)
        while self._sleepers and self._sleepers[0][0] <= target:
            due, _, fut = heapq.heappop(self._sleepers)
            if fut.done():  # cancelled
                continue
            self.now = max(self.now, due)
            fut.set_result(None)
            for _ in range(3):  # let the woken task (and what it wakes) run
                await asyncio.sleep(0)
        self.now = max(self.now, target)

    @contextlib.asynccontextmanager
    async def driving(self, step: float = 0.02, pause: float = 0.002) -> AsyncIterator[None]:
        """Advance ``step`` seconds every ``pause`` real seconds while the block runs."""

        async def drive() -> None:
            while True:
                await self.advance(step)
                await asyncio.sleep(pause)

        task = asyncio.get_running_loop().create_task(drive())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def reap(*procs: subprocess.Popen[Any] | None) -> None:
    """Kill each process of ``procs`` still running (a test's daemons at its end) and wait
    for it (bounded)."""
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def self_signed(dest: Path, *, ip: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for ``ip`` (in its subjectAltName, as hostname checks
    need) and its key, ``(cert.pem, key.pem)`` in ``dest``, made by the openssl CLI;
    skips the test when openssl is not installed."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    dest.mkdir(parents=True, exist_ok=True)
    cert, key = dest / "cert.pem", dest / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", f"/CN={ip}", "-addext", f"subjectAltName=IP:{ip}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def http_server(routes: dict[str, Handler], *,
                tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 serving ``routes`` (path -> handler), over
    HTTPS with the server context ``tls`` when given; yields the base URL."""

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            fn = routes.get(self.path.split("?")[0])
            if fn is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            fn(self)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # dropped connections are part of the tests

    server = Server(("127.0.0.1", 0), H)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def json_receiver() -> Iterator[tuple[str, list[Any]]]:
    """A webhook receiver on 127.0.0.1 (threaded): yields its URL (``.../hook``) and the
    list the JSON bodies POSTed to it are appended to, in order of arrival."""
    bodies: list[Any] = []
    lock = threading.Lock()

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                bodies.append(json.loads(raw))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies
    finally:
        server.shutdown()
        server.server_close()


def reply(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes,
          headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def endless_server(*, rate: int = 16 << 20, seconds: float = 20.0) -> Iterator[str]:
    """A server on 127.0.0.1 whose every answer (GET or POST) is ``200`` and a body that
    does not end: ``rate`` bytes a second until the client goes away or ``seconds`` pass
    (the bound that keeps a test against unfixed code from exhausting memory)."""
    chunk = b"x" * (64 << 10)

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            started = time.monotonic()
            sent = 0
            while time.monotonic() - started < seconds:
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return
                sent += len(chunk)
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass

    server = Server(("127.0.0.1", 0), H)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def rss_bytes() -> int:
    """This process's resident set size (``VmRSS`` of /proc/self/status), in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")
