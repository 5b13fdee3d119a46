"""The state directory is private: directories 0700, files 0600, whatever the umask lets
through no more (it holds prompts, observations and agent output)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler import atomic
from reconciler.state import lock
from tests.conftest import Repo
from tests.daemon.conftest import WAIT, read_json, wait_for

RUNNER = ("source:\n  type: poll\n  command: [cat, {value}]\n  interval: 500ms\n"
          "action:\n  type: run\n  command: [echo, ran]\n  prompt: 'saw {{{{ event }}}}'\n")
NOTIFIER = ("source:\n  type: poll\n  command: [cat, {value}]\n  interval: 500ms\n"
            "action:\n  type: notify\n  message: 'saw {{{{ event }}}}'\n")


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """Run the test (and the daemons it starts) under the umask ``request.param``."""
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _modes(state: Path) -> tuple[list[str], list[str]]:
    """Every directory (state itself included) and file below ``state``, as
    ``mode path``, that is not 0700 / 0600."""
    dirs, files = [], []
    for top, _dirs, filenames in os.walk(state):
        mode = stat.S_IMODE(os.stat(top).st_mode)
        if mode != 0o700:
            dirs.append(f"{mode:04o} {top}")
        for name in filenames:
            st = os.lstat(os.path.join(top, name))
            if stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_IMODE(st.st_mode) != 0o600:
                files.append(f"{stat.S_IMODE(st.st_mode):04o} {top}/{name}")
    return dirs, files


def _fired(repo: Repo, name: str, *extra: str) -> bool:
    base = repo.state / "monitors" / name / "fires"
    if not base.is_dir():
        return False
    return any((d / "event.json").exists() and all((d / e).exists() for e in extra)
               and (read_json(d / "event.json") or {}).get("status") == "succeeded"
               for d in base.iterdir())


@pytest.mark.parametrize("umask", [0o022, 0o077], indirect=True)
def test_a_real_daemon_leaves_only_private_state(detached: Repo, umask: int) -> None:
    repo = detached
    value = repo.root / "value.txt"
    value.write_text("v0\n")
    repo.write("monitors.d/runner.yml", RUNNER.format(value=value))
    repo.write("monitors.d/notifier.yml", NOTIFIER.format(value=value))
    # apply starts the daemon detached: daemon.log, the lock and the socket too
    p = subprocess.run([sys.executable, "-m", "reconciler", "--root", str(repo.root),
                        "--state-dir", str(repo.state), "--device", "test-box", "apply",
                        "--yes"], capture_output=True, text=True, timeout=90, cwd=repo.root)
    assert p.returncode == 0, p.stdout + p.stderr
    wait_for(lambda: (repo.state / "monitors" / "runner" / "state.json").exists(),
             what="baseline", timeout=WAIT)
    value.write_text("v1\n")
    wait_for(lambda: _fired(repo, "runner", "output.log", "prompt.txt"),
             what="run action done", timeout=WAIT)
    wait_for(lambda: _fired(repo, "notifier") and (repo.state / "notifications.log").exists(),
             what="notify done", timeout=WAIT)
    names = {p.name for p in repo.state.rglob("*")}
    assert {"daemon.log", "daemon.lock", "running.json", "state.json", "liveness.json",
            "event.json", "output.log", "prompt.txt", "notifications.log"} <= names
    assert _modes(repo.state) == ([], [])
    assert stat.S_IMODE(os.stat(repo.state / "control.sock").st_mode) == 0o600


def test_missing_parents_of_the_state_directory_are_private(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b" / "state"
    with lock.StateLock(state):
        pass
    for d in (tmp_path / "a", tmp_path / "a" / "b", state):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert stat.S_IMODE((state / lock.LOCK_FILE).stat().st_mode) == 0o600


def test_a_state_directory_made_0755_by_an_older_version_is_narrowed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    with lock.StateLock(state):
        pass
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_a_stricter_umask_stays_stricter(tmp_path: Path) -> None:
    old = os.umask(0o277)
    try:
        atomic.write_bytes(tmp_path / "f", b"x", durable=False)
        atomic.write_bytes(tmp_path / "g", b"x", durable=True)
        atomic.make_dirs(tmp_path / "d" / "e")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o400
    assert stat.S_IMODE((tmp_path / "g").stat().st_mode) == 0o400
    assert stat.S_IMODE((tmp_path / "d" / "e").stat().st_mode) == 0o500
    (tmp_path / "d" / "e").chmod(0o700)


def test_liveness_rewrites_do_not_keep_an_old_temp_files_mode(tmp_path: Path) -> None:
    leftover = tmp_path / ".f.tmp"  # left world-readable by a killed older version
    leftover.write_bytes(b"old")
    leftover.chmod(0o644)
    atomic.write_bytes(tmp_path / "f", b"x", durable=False)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600
    assert leftover.read_bytes() == b"old"  # every write has its own temp name


def test_repository_files_stay_readable(tmp_path: Path) -> None:
    from reconciler.config import writer

    old = os.umask(0o022)
    try:
        writer.atomic_write(tmp_path / "m.yml", "name: m\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.yml").stat().st_mode) == 0o644
