"""Shared helpers for engine tests: monitors from dicts, a recording dispatcher, a
loopback HTTP server."""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from reconciler.config import normalize
from reconciler.events import Event
from reconciler.model import Monitor


def monitor(source: dict[str, Any], *, name: str = "m", condition: dict[str, Any] | None = None,
            action: dict[str, Any] | None = None, **extra: Any) -> Monitor:
    """A normalized monitor from plain dicts (action defaults to notify)."""
    doc: dict[str, Any] = {"source": source, "action": action or {"type": "notify"}, **extra}
    if condition is not None:
        doc["condition"] = condition
    return normalize.monitor(doc, name=name)


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def http_server(routes: dict[str, Handler]) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 serving ``routes`` (path -> handler);
    yields the base URL."""

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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
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
