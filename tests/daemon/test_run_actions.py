"""run actions in the real daemon: a background child neither holds a run nor outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable

from tests.conftest import Repo, processes_with_arg, unique_sleep
from tests.daemon.conftest import Daemon, wait_for


def _run_monitor(value: str, command: str) -> str:
    return (f"source:\n  type: poll\n  command: [cat, {value}]\n  interval: 500ms\n"
            f"action:\n  type: run\n  command: [sh, -c, '{command}']\n  prompt: ''\n")


def test_background_children_end_with_their_run_and_with_the_daemon(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    value = repo.root / "value.txt"
    value.write_text("v0\n")
    quick, held = unique_sleep(), unique_sleep() + "1"
    repo.write("monitors.d/quick.yml", _run_monitor(str(value), f"sleep {quick} & echo hi"))
    repo.write("monitors.d/held.yml", _run_monitor(str(value), f"sleep {held} & sleep 60"))
    d = daemons().start()
    try:
        wait_for(lambda: d.state("quick").get("baseline") and d.state("held").get("baseline"),
                 what="baselines", log=d.log)
        for i in (1, 2):
            value.write_text(f"v{i}\n")
            wait_for(lambda i=i: [f.get("status") for f in d.fires("quick")]
                     == ["succeeded"] * i, timeout=10, what=f"run {i} succeeded", log=d.log)
        # overlap: skip did not skip the second run: the first had ended with its child
        assert not processes_with_arg(quick), "a background child outlived its run"
        wait_for(lambda: processes_with_arg(held), what="a run in flight", log=d.log)
        r = d.cli("stop")
        assert r.returncode == 0, r.stdout + r.stderr
        assert d.proc is not None and d.proc.wait(timeout=30) == 0
        assert not processes_with_arg(held), "a background child outlived the daemon"
        assert d.fires("held")[0]["status"] == "interrupted"
        log = d.log_text()
        assert "Event loop is closed" not in log and "Traceback" not in log, log[-3000:]
    finally:
        for leftover in processes_with_arg(quick) + processes_with_arg(held):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leftover, signal.SIGKILL)
