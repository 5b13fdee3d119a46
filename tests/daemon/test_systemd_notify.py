"""systemd's notify protocol on a real unix datagram socket: READY, WATCHDOG, RELOADING,
STOPPING from a real daemon (``daemon.sdnotify``)."""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.daemon import sdnotify
from tests.conftest import Repo
from tests.factories import monitor_yaml


@pytest.fixture
def notify_socket() -> Iterator[socket.socket]:
    where = Path(tempfile.mkdtemp(prefix="sdn-", dir="/tmp"))  # short: sun_path is ~107 bytes
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(where / "notify"))
    sock.settimeout(0.2)
    yield sock
    sock.close()
    shutil.rmtree(where, ignore_errors=True)


def received(sock: socket.socket, want: str, *, timeout: float = 20.0) -> list[str]:
    """Datagrams until one holds the line ``want`` (all of them, each as text)."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            continue
        if want in got[-1].splitlines():
            return got
    pytest.fail(f"no {want!r} within {timeout}s; got {got}")
    raise AssertionError


def test_the_daemon_notifies_ready_watchdog_reloading_and_stopping(
        repo: Repo, daemons, notify_socket: socket.socket) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, hi]", interval="1m"))
    d = daemons()
    d.env = {"NOTIFY_SOCKET": notify_socket.getsockname(), "WATCHDOG_USEC": "400000"}
    d.start(wait_ready=False)
    ready = received(notify_socket, "READY=1")
    assert "STATUS=1 monitors running" in ready[-1].splitlines()
    received(notify_socket, "WATCHDOG=1")
    received(notify_socket, "WATCHDOG=1")  # again, half the watchdog interval later
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    reload = received(notify_socket, "RELOADING=1")
    assert any(line.startswith("MONOTONIC_USEC=") for line in reload[-1].splitlines())
    received(notify_socket, "READY=1")
    d.proc.send_signal(signal.SIGTERM)
    received(notify_socket, "STOPPING=1")
    assert d.proc.wait(timeout=20) == 0


def test_abstract_addresses_and_no_socket() -> None:
    env = {"NOTIFY_SOCKET": "@monitors-test", "WATCHDOG_USEC": "1000000"}
    n = sdnotify.Notifier.from_env(env)
    assert n.address == "\0monitors-test" and n.watchdog == 1.0
    assert env == {}  # taken out: children never see them
    quiet = sdnotify.Notifier.from_env({})
    assert quiet.address is None and not quiet.send("READY=1")
    other = sdnotify.Notifier.from_env({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "5",
                                        "WATCHDOG_PID": "1"})
    assert other.watchdog is None
