"""Helpers for daemon tests: the real daemon as a subprocess on a temp repository.

Waits are bounded polls on conditions (``wait_for``), never sleeps that hope.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from reconciler.daemon import protocol
from reconciler.state import store as store_mod
from tests.conftest import Repo
from tests.helpers import reap

T = TypeVar("T")

WAIT = 20.0


def wait_for(cond: Callable[[], T], *, timeout: float = WAIT, what: str = "condition",
             log: Path | None = None) -> T:
    """Poll ``cond`` every 20 ms until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            pytest.fail(f"timed out after {timeout}s waiting for {what}\n--- daemon log ---\n"
                        f"{tail}")
        time.sleep(0.02)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class Daemon:
    """One ``monitors run`` subprocess on ``repo``."""

    def __init__(self, repo: Repo, *args: str, log_name: str = "daemon-test.log") -> None:
        self.repo = repo
        self.log = repo.root.parent / log_name
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}  # added to the environment of ``start``

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", "--root", str(self.repo.root),
                "--state-dir", str(self.repo.state), "--device", "test-box", *extra]

    def start(self, *, wait_ready: bool = True) -> Daemon:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv("run", "--resync", "2s", *self.args), stdout=out,
                stderr=subprocess.STDOUT, cwd=self.repo.root, start_new_session=True,
                env={**os.environ, **self.env})
        if wait_ready:
            wait_for(self.ready, what="daemon ready", log=self.log)
        return self

    def ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"daemon exited early with {self.proc.returncode}:\n"
                        f"{self.log.read_text(errors='replace')[-3000:]}")
        return "daemon ready" in self.log.read_text(errors="replace")

    def running(self) -> dict[str, Any]:
        """``running.json``'s monitors (empty when unreadable)."""
        doc = read_json(self.repo.state / "running.json") or {}
        monitors: dict[str, Any] = doc.get("monitors") or {}
        return monitors

    def liveness(self, name: str) -> dict[str, Any]:
        """What ``list`` reads: the newer of the aggregate and the monitor's own file."""
        store = store_mod.Store(self.repo.state, readonly=True)
        return dict(store.liveness(name) or {})

    def state(self, name: str) -> dict[str, Any]:
        return read_json(self.repo.state / "monitors" / name / "state.json") or {}

    def fires(self, name: str) -> list[dict[str, Any]]:
        base = self.repo.state / "monitors" / name / "fires"
        if not base.is_dir():
            return []
        out = []
        for d in sorted(base.iterdir()):
            doc = read_json(d / "event.json")
            if doc is not None:
                out.append(doc)
        return out

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = WAIT) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            pytest.fail(f"daemon did not exit within {timeout}s after signal {sig}")
            raise

    def cli(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``monitors ARGS`` as a subprocess against the same repo and state."""
        return subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout,
                              cwd=self.repo.root, env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture
def daemons(repo: Repo) -> Iterator[Callable[..., Daemon]]:
    """Factory of daemons on ``repo``; every one still alive is killed at the end."""
    made: list[Daemon] = []

    def make(*args: str, log_name: str = "daemon-test.log") -> Daemon:
        d = Daemon(repo, *args, log_name=log_name)
        made.append(d)
        return d

    yield make
    reap(*(d.proc for d in made))


@pytest.fixture
def detached(repo: Repo) -> Iterator[Repo]:
    """``repo``; a daemon that ``apply`` started detached is stopped at the end
    (``monitors stop``'s core, then SIGKILL if it did not let go of the lock)."""
    from reconciler.client import stopper

    yield repo
    done = stopper.stop(repo.state, wait=WAIT)
    if not done.stopped and done.pid is not None:
        os.kill(done.pid, signal.SIGKILL)


def raw_request(state: Path, line: bytes) -> dict[str, Any]:
    """Send one raw control request line; return the decoded reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT)
        sock.connect(protocol.connect_path(state))
        sock.sendall(line + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    return reply
