"""Fixtures for action tests: a real store, monitors, events, a loopback HTTP receiver."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import socket
import stat
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconciler.actions import dispatch, options
from reconciler.events import Event
from reconciler.model import Monitor
from reconciler.state.store import Store
from tests import factories


def monitor(action: Mapping[str, Any], *, name: str = "mon", rate_limit: Any = None,
            description: str = "a test monitor") -> Monitor:
    """A resolved Monitor with a poll source every 30s and ``action`` (schema form): the
    shared factory (``tests.factories``) with the defaults these tests use."""
    extra: dict[str, Any] = {"description": description}
    if rate_limit:
        extra["rateLimit"] = rate_limit
    return factories.monitor({"type": "poll", "command": ["true"], "interval": "30s"},
                             name=name, action=action, **extra)


def event(mon: Any, summary: str = "CI failed", *, observation: str = "build 7: fail") -> Event:
    """A fresh event of ``mon`` with a sortable unique id."""
    now = dt.datetime.now(dt.UTC)
    return Event(
        id=f"{now.strftime('%Y%m%dT%H%M%S.%f')}-{secrets.token_hex(4)}",
        monitor=mon.name,
        fingerprint=mon.fingerprint,
        fired_at=now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        summary=summary,
        signature="sig-1",
        observation=observation,
        meta={"exitCode": 1},
        groups=("7",),
        reason="matched new signature",
    )


def fire(store: Store, mon: Any, ev: Event) -> None:
    """What the evaluator does before dispatch: a durable pending record."""
    store.create_fire(mon.name, ev, status="pending")


def record(store: Store, mon: Any, ev: Event) -> dict[str, Any]:
    rec = store.read_fire(mon.name, ev.id)
    assert rec is not None
    return rec


def make_dispatcher(store: Store, toml: Mapping[str, Any] | None = None, *,
                    environ: Mapping[str, str] | None = None, **kw: Any) -> dispatch.Dispatcher:
    """A dispatcher with fast backoffs."""
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("backoff_cap", 0.05)
    kw.setdefault("kill_grace", 1.0)
    return dispatch.Dispatcher(store, options.parse(toml or {}), state_dir=store.root,
                               environ=environ if environ is not None else {}, **kw)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state")


def write_script(path: Path, body: str) -> Path:
    """A real executable Python script (shebang: this interpreter)."""
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """A real HTTP server on 127.0.0.1 answering from a script of responses."""

    url: str
    requests: list[Received] = field(default_factory=list)
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    hold: threading.Event | None = None

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.requests)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            state.requests.append(Received("POST", self.path, dict(self.headers.items()), body,
                                           time.monotonic()))
            if state.hold is not None:
                state.hold.wait(10)
            status, headers = state.script.pop(0) if state.script else (200, {})
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        if state.hold is not None:
            state.hold.set()
        server.shutdown()
        server.server_close()


def refused_port() -> int:
    """A loopback port nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def notifications(store: Store) -> list[str]:
    path = store.root / "notifications.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
