"""``server.offload``: heavy views run in a helper process (not the daemon's), started on
first use, replaced when it dies, stopped when idle, at a lower CPU priority."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reconciler import errors
from reconciler.server import offload
from tests.helpers import until


def test_a_job_runs_in_another_process_and_a_dead_worker_is_replaced() -> None:
    async def go() -> None:
        helper = offload.Offload()
        try:
            pid = await helper.run(os.getpid)
            assert pid != os.getpid() and pid == helper.pid
            os.kill(pid, signal.SIGKILL)
            with pytest.raises(errors.StateError, match="view worker stopped"):
                for _ in range(50):  # the pool notices the death on its next call
                    await helper.run(os.getpid)
                    await asyncio.sleep(0.05)
            again = await helper.run(os.getpid)
            assert again not in (pid, os.getpid())
            assert helper.started == 2
            mine = os.getpriority(os.PRIO_PROCESS, 0)  # the worker gives way to the loop
            assert os.getpriority(os.PRIO_PROCESS, again) == min(19, mine + offload.NICE)
        finally:
            await helper.close()

    asyncio.run(go())


def test_a_worker_that_cannot_start_is_a_state_error_and_the_next_call_retries() -> None:
    async def go() -> None:
        helper = offload.Offload()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        refused = 0
        try:
            for spare in range(1, 16):  # out of fds at the pipes, the semaphores, the spawn
                open_now = len(os.listdir("/proc/self/fd"))
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + spare, hard))
                try:
                    await helper.run(os.getpid)
                except errors.StateError as e:
                    assert "view worker could not start" in str(e)
                    assert "Too many open files" in str(e)
                    refused += 1
                finally:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                await helper.close()
            assert refused
            assert await helper.run(os.getpid) != os.getpid()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            await helper.close()

    asyncio.run(go())


def test_the_worker_ignores_a_ctrl_c_its_daemon_handles() -> None:
    async def go() -> None:
        helper = offload.Offload()
        try:
            pid = await helper.run(os.getpid)
            ignored = int(_status(pid)["SigIgn"], 16)
            assert ignored & (1 << (signal.SIGINT - 1)), "SIGINT is not ignored"
            os.kill(pid, signal.SIGINT)  # what Ctrl-C sends to the process group
            assert await helper.run(os.getpid) == pid
        finally:
            await helper.close()

    asyncio.run(go())


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def test_the_worker_stops_when_idle() -> None:
    async def go() -> None:
        helper = offload.Offload(idle=0.2)
        try:
            pid = await helper.run(os.getpid)
            await until(lambda: helper.pid is None, timeout=10)
            await until(lambda: not Path(f"/proc/{pid}").exists(), timeout=10)
        finally:
            await helper.close()

    asyncio.run(go())


def test_the_worker_does_not_outlive_a_killed_daemon(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(
        "import asyncio, os, signal\n"
        "from reconciler.server import offload\n"
        "async def main():\n"
        "    helper = offload.Offload()\n"
        "    print(await helper.run(os.getpid), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "if __name__ == '__main__':\n"
        "    asyncio.run(main())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == -signal.SIGKILL, done.stderr
    worker = int(done.stdout.split()[0])
    deadline = time.monotonic() + 15
    while Path(f"/proc/{worker}").exists() and "Z" not in _state(worker):
        assert time.monotonic() < deadline, "the worker outlived its daemon"
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
