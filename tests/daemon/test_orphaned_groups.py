"""After a ``kill -9`` of the daemon, the next start kills the process groups it left
(``daemon.orphans``): no poll, command or run lives on to run twice."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
