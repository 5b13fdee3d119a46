"""After a ``kill -9`` of the daemon, the next start kills the process groups it left
(``daemon.orphans``): no poll, command or run lives on to run twice."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler import processes
from reconciler.daemon import orphans
from tests.conftest import Repo, processes_with_arg, unique_sleep
from tests.daemon.conftest import Daemon, wait_for


def test_groups_a_killed_daemon_left_are_killed_at_the_next_start(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    poll, command, run, background = (unique_sleep() + str(i) for i in range(4))
    value = repo.root / "value.txt"
    value.write_text("v0\n")
    repo.write("monitors.d/slow.yml", f"source: {{type: poll, command: [sleep, '{poll}'], "
                                      "interval: 1s, timeout: 10m}\naction: {type: notify}\n")
    repo.write("monitors.d/stream.yml", f"source: {{type: command, command: [sleep, "
                                        f"'{command}']}}\naction: {{type: notify}}\n")
    repo.write("monitors.d/act.yml",
               f"source: {{type: poll, command: [cat, {value}], interval: 500ms}}\n"
               f"action: {{type: run, command: [sh, -c, 'sleep {background} & sleep {run}'], "
               "prompt: '', timeout: 10m}\n")
    leftovers = (poll, command, run, background)
    try:
        first = daemons(log_name="first.log").start()
        wait_for(lambda: first.state("act").get("baseline"), what="baseline", log=first.log)
        value.write_text("v1\n")
        wait_for(lambda: all(processes_with_arg(a) for a in leftovers),
                 what="every group running", log=first.log)
        # a group is recorded just after its spawn returns: a kill inside that window
        # (microseconds, but long on a loaded machine) leaves it unrecorded
        groups = {os.getpgid(pid) for a in leftovers for pid in processes_with_arg(a)}
        wait_for(lambda: groups <= {g[0] for g in orphans.recorded(repo.state)},
                 what="the groups recorded", log=first.log)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        old = [pid for a in leftovers for pid in processes_with_arg(a)]
        assert len(old) == 4  # orphans under init, in three groups (poll, command, run)

        second = daemons(log_name="second.log").start()
        wait_for(lambda: not any(processes.alive(pid) for pid in old), timeout=10,
                 what="the old groups killed", log=second.log)
        assert "killed 3 process groups left running by a daemon" in second.log_text()
        # the new daemon's own poll and command run once each, not twice
        wait_for(lambda: processes_with_arg(command), what="the new command", log=second.log)
        assert len(processes_with_arg(command)) == 1
        assert second.stop() == 0
        assert json.loads((repo.state / orphans.FILE).read_text()) == {"groups": []}
    finally:
        for arg in leftovers:
            for pid in processes_with_arg(arg):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_a_reused_pid_is_never_killed(tmp_path: Path) -> None:
    arg = unique_sleep()
    other = subprocess.Popen(["sleep", arg], start_new_session=True)
    try:
        start = processes.start_time(other.pid)
        assert start is not None
        (tmp_path / orphans.FILE).write_text(json.dumps(
            {"groups": [{"pgid": other.pid, "pid": other.pid, "start": start - 1}]}))
        assert orphans.reap(tmp_path) == 0 and other.poll() is None
        (tmp_path / orphans.FILE).write_text(json.dumps(
            {"groups": [{"pgid": other.pid, "pid": other.pid, "start": start}]}))
        assert orphans.reap(tmp_path) == 1
        assert other.wait(timeout=10) == -signal.SIGKILL
    finally:
        other.kill()
        other.wait()


def test_an_unreadable_record_kills_nothing(tmp_path: Path) -> None:
    for text in ("", "{", '{"groups": [{"pgid": 0, "pid": 0, "start": 1}]}', "[]",
                 '{"groups": [{"pgid": -1, "pid": 1, "start": 1}]}'):
        (tmp_path / orphans.FILE).write_text(text)
        assert orphans.reap(tmp_path) == 0
    assert sys.platform != "linux" or processes.alive(1)


def _procs_with(marker: str) -> list[tuple[int, int]]:
    """(pid, pgid) of live processes whose command line contains ``marker``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
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
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode(errors="replace")
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


def test_short_lived_groups_cost_no_write_and_the_last_state_is_written(tmp_path: Path
                                                                       ) -> None:
    """A poll's command lives milliseconds: recording every start and end rewrote
    children.json twice per poll on the event loop. Writes are coalesced: 50 short
    commands give one write (of the groups as they are then), and a long-lived one is in
    the file within the delay."""
    writes: list[list[tuple[int, int, int]]] = []

    class Counting(orphans.Recorder):
        def _write(self) -> None:
            super()._write()
            writes.append(orphans.recorded(tmp_path))

    async def go() -> None:
        recorder = Counting(tmp_path, delay=0.2)
        me = os.getpid()  # a live leader with a real start time stands in for each group
        for _ in range(50):
            recorder.started(me)
            recorder.ended(me)
        long_lived = subprocess.Popen(["sleep", unique_sleep()], start_new_session=True)
        try:
            recorder.started(long_lived.pid)
            await asyncio.sleep(0.5)
            assert [g[0] for g in orphans.recorded(tmp_path)] == [long_lived.pid]
            recorder.ended(long_lived.pid)
            recorder.flush()
        finally:
            long_lived.kill()
            long_lived.wait()

    asyncio.run(go())
    assert len(writes) == 2  # the coalesced one, then the final flush
    assert writes[-1] == []
