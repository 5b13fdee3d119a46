"""Real daemons serving HTTP on free loopback ports, one temp repository each.

``peers(name)`` starts ``monitors run`` with ``--device NAME``, ``MONITORS_TOKEN``
and ``MONITORS_HTTP_LISTEN=127.0.0.1:<free port>``; ``Peer.url`` is the bound
address the daemon reports in ``status`` (``endpoints.http``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reconciler.client import control
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml
from tests.helpers import reap

TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_repo(base: Path, name: str) -> Repo:
    root = base / name
    (root / "monitors.d" / "overlays").mkdir(parents=True)
    (root / "system").mkdir()
    return Repo(root)


class Peer(Daemon):
    """One daemon as device ``device`` on its own repository, serving HTTP."""

    def __init__(self, repo: Repo, device: str, *, port: int | None = None,
                 token: str | None = TOKEN) -> None:
        super().__init__(repo, log_name=f"daemon-{device}.log")
        self.device = device
        self.port = port if port is not None else free_port()
        self.env = {"MONITORS_HTTP_LISTEN": f"127.0.0.1:{self.port}"}
        if token is not None:
            self.env["MONITORS_TOKEN"] = token

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", "--root", str(self.repo.root),
                "--state-dir", str(self.repo.state), "--device", self.device, *extra]

    def cli(self, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """``monitors ARGS`` as this device, with this peer's environment."""
        return subprocess.run(self.argv(*args), capture_output=True, text=True,
                              timeout=timeout, cwd=self.repo.root,
                              env={**os.environ, "NO_COLOR": "1", **self.env})

    def serve_tls(self, cert: Path, key: Path) -> None:
        """Serve HTTPS with ``cert`` and ``key`` (``[http] certFile``/``keyFile``);
        before ``start``."""
        shutil.copy(cert, self.repo.root / "cert.pem")
        shutil.copy(key, self.repo.root / "key.pem")
        self.repo.write("monitors.toml", '[http]\ncertFile = "cert.pem"\nkeyFile = "key.pem"\n')
        os.chmod(self.repo.root / "monitors.toml", 0o644)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        status = control.status(self.repo.state)
        assert status is not None, "daemon not running"
        return str(status["endpoints"]["http"])

    def get(self, path: str, *, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + path, headers=headers, timeout=10, **kw)

    def post(self, path: str, *, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, headers=headers, timeout=10, **kw)

    def wait_polled(self, name: str) -> None:
        wait_for(lambda: self.liveness(name).get("checkCount"), what=f"{name} polled",
                 log=self.log)


@pytest.fixture
def peers(tmp_path: Path) -> Iterator[Callable[..., Peer]]:
    """Factory: ``peers(device, monitors={name: command}, port=None, start=True)``."""
    made: list[Peer] = []

    def make(device: str, *, monitors: dict[str, str] | None = None, port: int | None = None,
             start: bool = True, token: str | None = TOKEN) -> Peer:
        repo = make_repo(tmp_path, device)
        for name, command in (monitors or {}).items():
            repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, command, interval="1s"))
        peer = Peer(repo, device, port=port, token=token)
        made.append(peer)
        if start:
            peer.start()
        return peer

    yield make
    reap(*(p.proc for p in made))
