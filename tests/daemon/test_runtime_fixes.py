"""Regression tests for the runtime findings (orphans, lost state directory, auto-pause
display and stop, newer state versions), on the real daemon as a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


def _procs_with(marker: str) -> list[tuple[int, int]]:
    """(pid, pgid) of live processes whose command line contains ``marker``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if marker in cmdline and ") Z " not in stat:
            out.append((int(entry.name), os.getpgid(int(entry.name))
                        if _alive(int(entry.name)) else -1))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sleeper(marker: str) -> list[tuple[int, int]]:
    return [p for p in _procs_with(marker) if "sh -c" not in _cmd(p[0])]


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _kill_leftovers(marker: str) -> None:
    for pid, _ in _procs_with(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


FORMS = {
    # the shell form used to escape: `sleep` survived the daemon, reparented to init
    "poll-shell": "source: {{type: poll, command: 'sleep {secs}; echo done', interval: 2m}}",
    "poll-list": "source: {{type: poll, command: [sleep, '{secs}'], interval: 2m}}",
    "command-shell": "source: {{type: command, command: 'sleep {secs}; echo done'}}",
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("how", ["sigterm", "stop", "replace"])
def test_in_flight_process_group_is_killed(repo: Repo, daemons: Callable[..., Daemon],
                                           form: str, how: str) -> None:
    secs = f"102.{secrets.randbelow(10**6):06d}"  # a unique command line to look for
    doc = FORMS[form].format(secs=secs)
    path = repo.write("monitors.d/hang.yml", f"{doc}\naction: {{type: notify}}\n")
    try:
        d = daemons().start()
        found = wait_for(lambda: _sleeper(secs), what="the sleep running", log=d.log)
        (pid, pgid), = found
        assert pgid != os.getpgid(d.proc.pid if d.proc else 0)  # its own group
        if how == "sigterm":
            assert d.stop() == 0
            assert "stopped" in d.log_text()
        elif how == "stop":
            path.unlink()
            wait_for(lambda: "hang" not in d.running(), what="hang stopped", log=d.log)
        else:
            # a new source is a new fingerprint: the evaluator is replaced
            path.write_text(path.read_text().replace(secs, secs + "1"))
            wait_for(lambda: _sleeper(secs + "1"), what="the new sleep", log=d.log)
        wait_for(lambda: not _alive(pid), timeout=10, what=f"sleep {pid} killed ({how})",
                 log=d.log)
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)  # nothing of its process group is left
    finally:
        _kill_leftovers(secs)


def test_deleted_state_directory_stops_the_daemon(repo: Repo,
                                                  daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 1s}\ncondition: {mode: every}\n"
                                      "action: {type: notify}\n")
    first = daemons().start()
    wait_for(lambda: first.fires("tick"), what="a first fire", log=first.log)

    def removed() -> bool:  # `rm -rf .history`, retried while the daemon writes into it
        shutil.rmtree(repo.state, ignore_errors=True)
        return not repo.state.exists()

    wait_for(removed, what=".history removed", log=first.log)
    # the running daemon notices within a few seconds and exits non-zero
    assert first.proc is not None
    wait_for(lambda: first.proc is not None and first.proc.poll() is not None, timeout=15,
             what="the first daemon exiting", log=first.log)
    assert first.proc.returncode == 1
    lines = [x for x in first.log_text().splitlines() if "ERROR" in x and "lost" in x]
    assert len(lines) == 1 and "daemon.lock" in lines[0], first.log_text()[-2000:]
    # it wrote nothing into the directory after it was lost
    assert not (repo.state / "running.json").exists()
    # a second daemon now owns the directory alone and fires
    second = daemons(log_name="second.log").start()
    wait_for(lambda: second.fires("tick"), what="the second daemon firing", log=second.log)
    assert second.stop() == 0


def test_lock_replaced_under_the_daemon_stops_it(repo: Repo,
                                                 daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 5s}\naction: {type: notify}\n")
    d = daemons("--resync", "60s").start()
    lock = repo.state / "daemon.lock"
    lock.unlink()
    lock.write_text("12345\n")  # a new inode: another daemon could lock it
    assert d.proc is not None
    wait_for(lambda: d.proc is not None and d.proc.poll() is not None, timeout=15,
             what="the daemon exiting", log=d.log)
    assert d.proc.returncode == 1 and "lock file replaced" in d.log_text()


FAST = ("source: {type: poll, command: [echo, tick], interval: 500ms}\n"
        "condition: {mode: every}\nrateLimit: {max: 3, per: 1m}\naction: {type: notify}\n")


def test_auto_pause_stops_the_evaluator_at_once(repo: Repo,
                                                daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/fast.yml", FAST)
    d = daemons("--resync", "60s").start()  # the resync would only stop it after 60 s
    wait_for(lambda: (repo.state / "monitors" / "fast" / "autopause.json").exists(),
             what="auto-pause", log=d.log)
    paused_at = time.monotonic()
    wait_for(lambda: "fast" not in d.running(), timeout=10, what="fast stopped", log=d.log)
    assert time.monotonic() - paused_at < 10
    assert "reconciled (auto-pause)" in d.log_text()
    plan = d.cli("plan", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout  # the registry agrees with plan at once
    assert len(d.fires("fast")) == 3


def test_auto_paused_and_stopped_monitors_are_not_stalled(repo: Repo) -> None:
    # no daemon: an auto-paused monitor whose last poll is long ago (the list used to
    # say `auto-paused: ... · STALLED · last poll 16s ago`, forever)
    repo.write("monitors.d/fast.yml", FAST)
    base = repo.state / "monitors" / "fast"
    base.mkdir(parents=True)
    old = time.time() - 3600
    (base / "liveness.json").write_text(json.dumps(
        {"version": 1, "lastCheckedAt": old, "checkCount": 4, "fireCount": 3,
         "lastFiredAt": old}))
    (base / "autopause.json").write_text(json.dumps(
        {"version": 1, "reason": "rate limit: more than 3 fires within 1m", "at": "x"}))
    from tests.conftest import run_cli

    out = run_cli(["list"], repo=repo)
    assert out.exit_code == 0, out.output
    assert "auto-paused: rate limit" in out.stdout and "STALLED" not in out.stdout


def test_newer_state_version_is_refused_shown_and_never_overwritten(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 500ms}\ncondition: {mode: every}\n"
                                      "action: {type: notify}\n")
    d = daemons().start()
    wait_for(lambda: d.fires("tick"), what="a first fire", log=d.log)
    state = repo.state / "monitors" / "tick" / "state.json"
    future = json.dumps({"version": 99, "fromTheFuture": True})
    tmp = state.with_name("state.json.new")

    def appear() -> bool:
        # it appears while the daemon runs (again if a write already under way when it
        # was put there replaced it: an outside writer takes no lock)
        if not state.exists() or state.read_text() != future:
            tmp.write_text(future)
            os.replace(tmp, state)
        return "not run" in d.log_text()

    wait_for(appear, what="the monitor parked", log=d.log)
    # the write that found it was refused (its fire record undone) and nothing ran since
    fired = len(d.fires("tick"))
    assert "tick" in d.running() and state.read_text() == future  # kept untouched
    reason = ("state.json has format version 99, newer than this monitors supports "
              "(kept untouched)")
    listing = d.cli("list")
    assert listing.returncode == 0, listing.stderr
    assert "tick  refused" in listing.stdout, listing.stdout
    assert f"refused: {reason}" in listing.stdout and "STALLED" not in listing.stdout
    view = d.cli("view", "tick")
    assert view.returncode == 0, view.stderr
    assert reason in view.stdout and "source:" in view.stdout
    assert len(d.fires("tick")) == fired and state.read_text() == future
    # after a restart it is refused at start and still kept
    assert d.stop() == 0
    again = daemons(log_name="again.log").start()
    wait_for(lambda: "not run" in again.log_text(), what="refused at start", log=again.log)
    assert state.read_text() == future
    assert again.stop() == 0
