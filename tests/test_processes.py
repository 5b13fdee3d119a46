"""reconciler.processes: pid liveness and start time read from a real /proc."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from reconciler import processes


def test_start_time_survives_a_command_name_with_spaces_and_parentheses() -> None:
    rename = "import sys; sys.stdin.readline(); open('/proc/self/comm', 'w').write(') R 1 (x'); " \
             "print('renamed', flush=True); sys.stdin.readline()"
    child = subprocess.Popen([sys.executable, "-c", rename], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        before = processes.start_time(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "renamed\n"
        with open(f"/proc/{child.pid}/stat") as f:
            assert f.read().startswith(f"{child.pid} () R 1 (x) ")
        assert isinstance(before, int) and processes.start_time(child.pid) == before
        assert processes.alive(child.pid)
    finally:
        child.kill()
        child.wait()


def test_start_time_differs_between_processes_and_is_none_when_gone() -> None:
    assert processes.start_time(os.getpid()) != processes.start_time(1)
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert processes.start_time(gone.pid) is None and not processes.alive(gone.pid)


@pytest.mark.parametrize("pid", [0, -1, processes.PID_MAX + 1, 2**70])
def test_out_of_range_pids_are_never_alive(pid: int) -> None:
    assert not processes.alive(pid) and processes.start_time(pid) is None


def test_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    try:
        assert not processes.alive(child.pid)
    finally:
        child.wait()


PIDFD_CHILDREN = """
import asyncio, sys, threading
from reconciler import processes
used = processes.use_pidfd_watcher()

async def main():
    children = [await processes.spawn(["sh", "-c", f"sleep 0.3; exit {i}"], cwd=None,
                                      env=None) for i in range(20)]
    threads = threading.active_count()  # while all 20 run
    codes = [await c.wait_exit() for c in children]
    for c in children:
        processes.close(c)
    return codes, threads

codes, threads = asyncio.run(main())
print(used, type(asyncio.get_child_watcher()).__name__ if used else "-",
      codes == list(range(20)), threads)
"""


def test_children_are_reaped_without_a_thread_each() -> None:
    done = subprocess.run([sys.executable, "-c", PIDFD_CHILDREN], capture_output=True,
                          text=True, timeout=60, cwd=os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr
    used, watcher, exit_codes_ok, threads = done.stdout.split()
    assert exit_codes_ok == "True"
    if sys.version_info < (3, 12) and hasattr(os, "pidfd_open") and used == "True":
        assert watcher == "PidfdChildWatcher"
    if hasattr(os, "pidfd_open"):  # exits heard through pidfds; only the spawn threads
        assert int(threads) <= 1 + processes.SPAWN_THREADS


def test_children_start_off_the_event_loop_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A burst of starts must not run one after another on the loop thread (each
    blocks its caller until the child exec'd)."""
    starters: list[str] = []
    real = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        starters.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)

    async def main() -> list[tuple[int, bytes]]:
        children = await asyncio.gather(*(
            processes.spawn(["sh", "-c", f"echo {i}; exit {i}"], cwd=None, env=None)
            for i in range(8)))
        try:
            return [(await c.wait_exit(), await c.stdout.read()) for c in children]
        finally:
            for c in children:
                processes.close(c)

    assert asyncio.run(main()) == [(i, f"{i}\n".encode()) for i in range(8)]
    assert len(starters) == 8 and threading.main_thread().name not in starters
