"""A real etcd (Debian's ``etcd-server``: ``/usr/bin/etcd``) for failover-owner tests.

``Etcd`` runs one single-member cluster on free loopback ports with its data in a temp
directory; it can be stopped and started again on the same ports and data (an outage).
``etcd_server`` is the fixture: it skips the test only when no etcd binary exists
(``.ci/run`` installs ``etcd-server`` when missing).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.daemon.conftest import wait_for
from tests.helpers import free_port


def binary() -> str | None:
    """The etcd server binary on PATH (or Debian's path), or None."""
    found = shutil.which("etcd")
    if found is None and Path("/usr/bin/etcd").exists():
        found = "/usr/bin/etcd"
    return found


class Etcd:
    """One etcd member on ``127.0.0.1``: ``url`` is its client URL."""

    def __init__(self, exe: str, base: Path) -> None:
        self.exe = exe
        self.data = base / "etcd-data"
        self.log = base / "etcd.log"
        self.client_port, self.peer_port = free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self) -> Etcd:
        peer = f"http://127.0.0.1:{self.peer_port}"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [self.exe, "--name", "t", "--data-dir", str(self.data),
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"t={peer}", "--log-level", "warn"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self.healthy, what="etcd healthy", log=self.log)
        return self

    def healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"etcd exited with {self.proc.returncode}:\n"
                        f"{self.log.read_text(errors='replace')[-2000:]}")
        try:
            answer: dict[str, str] = httpx.get(self.url + "/health", timeout=1).json()
            return answer.get("health") == "true"
        except (httpx.HTTPError, ValueError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


@pytest.fixture
def etcd_server(tmp_path: Path) -> Iterator[Etcd]:
    """A running etcd for one test; skipped when no etcd binary is installed."""
    exe = binary()
    if exe is None:
        pytest.skip("no etcd binary (Debian: apt-get install etcd-server)")
    server = Etcd(exe, tmp_path)
    server.start()
    yield server
    server.stop()
