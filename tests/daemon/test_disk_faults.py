"""Disk faults: a full state directory at start and while running (issue 9 §7).

A full disk is real here: a small tmpfs mounted on the state directory and filled
(``mount`` needs root, as CI runs; the tests skip with the reason otherwise). The
atomic-write layer also gets unit tests with an injected ``ENOSPC``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import atomic, errors
from reconciler.state import lock as lock_mod
from reconciler.state import writeerrors
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml

Mount = Callable[..., Path]


@pytest.fixture
def tmpfs() -> Iterator[Mount]:
    """``mount(path, size)``: a tmpfs of ``size`` (e.g. ``"1m"``) on ``path``, unmounted
    at the end; skips the test when this machine does not let us mount one."""
    mounted: list[Path] = []

    def mount(path: Path, size: str = "1m") -> Path:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755",
                               "tmpfs", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs to make a real full disk (needs root): "
                        f"{done.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    """Write zeros into ``directory/fill`` until the file system says it is full."""
    with open(directory / "fill", "wb", buffering=0) as f:
        block = b"\0" * 4096
        try:
            while True:
                f.write(block)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# -- at start -------------------------------------------------------------------------------


def test_run_on_a_full_disk_is_one_line_and_exit_1(repo: Repo, tmpfs: Mount) -> None:
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]"))
    fill(tmpfs(repo.state, "64k"))
    done = Daemon(repo).cli("run", "--once")
    line = one_line(done.stderr)
    assert done.returncode == 1, done.stderr
    assert "daemon.lock" in line and "No space left on device" in line


def test_run_once_filling_the_disk_exits_1_naming_running_json(repo: Repo,
                                                               tmpfs: Mount) -> None:
    # --once publishes running.json only when it stops: the disk filled by its one poll
    # makes that publish fail, and the run exits 1 with the line a failed reconcile
    # publish gives (not 0 with the registry left stale).
    state = tmpfs(repo.state, "256k")
    repo.write("monitors.d/a.yml", monitor_yaml(
        "a", f"'cat /dev/zero > {state}/fill; echo filled'", interval="1h"))
    done = Daemon(repo).cli("run", "--once", "--wait", "20s")
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "running.json" in last and "cannot publish the running registry" in last, last
    assert "No space left on device" in last and "Traceback" not in done.stderr


def test_apply_relays_the_daemon_start_error_on_a_full_disk(detached: Repo,
                                                            tmpfs: Mount) -> None:
    repo = detached
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]"))
    fill(tmpfs(repo.state, "64k"))
    done = Daemon(repo).cli("apply", "--yes")
    assert done.returncode == 1, done.stdout + done.stderr
    line = one_line(done.stderr)
    # the daemon's own line, though daemon.log (on the same full disk) could not take it
    assert "the daemon could not start" in line
    assert "daemon.lock: cannot write the lock file: No space left on device" in line


def test_lock_write_error_is_one_line_and_releases_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(lock_mod.os, "pwrite", full)
    with pytest.raises(errors.StateError, match=r"daemon.lock: cannot write the lock file: "
                       r"No space left on device \(the file system is full"):
        lock_mod.StateLock(tmp_path).acquire()
    monkeypatch.undo()
    with lock_mod.StateLock(tmp_path):  # nothing was left holding it
        assert lock_mod.holder_pid(tmp_path) == os.getpid()


def test_atomic_write_error_names_the_file_and_leaves_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")

    def full(_: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # fsync(2): no file name

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError) as caught:
        atomic.write_bytes(target, b"new", durable=True)
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(target)
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


# -- while running --------------------------------------------------------------------------


def test_list_shows_the_write_error_not_stalled_and_logs_no_traceback(
        repo: Repo, daemons: Callable[..., Daemon], tmpfs: Mount) -> None:
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]", interval="500ms"))
    tmpfs(repo.state, "2m")
    d = daemons().start()
    wait_for(lambda: d.liveness("a").get("checkCount"), what="a first check", log=d.log)
    fill(repo.state)

    def shown() -> dict[str, Any] | None:
        row = json.loads(d.cli("list", "--json").stdout)["monitors"][0]
        return row if "cannot write state" in row["livenessText"] else None

    row = wait_for(shown, what="list showing the write error", log=d.log)
    assert row["liveness"]["status"] == "error"
    assert str(row["liveness"]["writeError"]).endswith(
        "/liveness.json: No space left on device")
    assert "STALLED" not in d.cli("list").stdout
    (repo.state / "fill").unlink()  # space again: the error goes away
    wait_for(lambda: "cannot write state" not in d.cli("list").stdout,
             what="list without the write error", log=d.log)
    assert d.stop() == 0
    log = d.log_text()
    assert "Traceback" not in log
    assert log.count("cannot write the state directory") == 1
    assert "state writes work again" in log


def test_write_errors_are_logged_once_and_cleared(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="monitors")
    tracked = writeerrors.WriteErrors(clock=lambda: 100.0)
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/s/monitors/a/liveness.json")
    for name in ("a", "b", "a"):
        with pytest.raises(OSError), tracked.track(name):
            raise full
    assert tracked.snapshot() == {
        "a": {"error": "/s/monitors/a/liveness.json: No space left on device", "since": 100.0},
        "b": {"error": "/s/monitors/a/liveness.json: No space left on device", "since": 100.0}}
    with tracked.track("a"):
        pass
    assert list(tracked.snapshot()) == ["b"]
    tracked.ok("b")
    assert tracked.snapshot() == {}
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot write the state directory" in m for m in messages) == 1
    assert messages[-1] == "state writes work again"


def test_a_write_error_is_shown_instead_of_stalled() -> None:
    from reconciler.state import store as store_mod
    from tests.factories import monitor

    m = monitor({"type": "poll", "command": "true", "interval": "500ms"})
    stale = {"lastCheckedAt": 0.0, "checkCount": 3}  # the file kept its last good write
    assert store_mod.liveness_view(stale, m, 7200.0)["status"] == "stalled"
    failing = {"error": "/s/monitors/m/liveness.json: No space left on device",
               "since": 7100.0}
    view = store_mod.liveness_view(stale, m, 7200.0, write_error=failing)
    assert view["status"] == "error" and not view["stalled"]
    assert view["text"].startswith("error: cannot write state for 1m: /s/monitors/m/"
                                   "liveness.json: No space left on device")
    # a monitor no daemon runs is not affected by a stale report
    view = store_mod.liveness_view(stale, m, 7200.0, running=False, write_error=failing)
    assert view["status"] == "ok"
