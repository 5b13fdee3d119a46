"""Restarts keep the schedule, with the real daemon: an hourly ``every`` monitor fires at
its first start and not again when the daemon restarts; ``run --once`` still polls."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


def test_a_restarted_daemon_does_not_poll_a_recently_checked_monitor(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/hourly.yml", """
        name: hourly
        source: {type: poll, command: [echo, tick], interval: 1h}
        condition: {mode: every}
        action: {type: notify}
    """)
    d = daemons().start()
    wait_for(lambda: len(d.fires("hourly")) == 1, what="the first fire", log=d.log)
    assert d.stop() == 0
    checks = d.liveness("hourly")["checkCount"]

    d2 = daemons(log_name="daemon-2.log").start()
    wait_for(lambda: "hourly: schedule kept: next poll in" in d2.log_text(),
             what="the kept schedule", log=d2.log)
    time.sleep(1.0)  # a poll at start would have happened by now (one monitor: at once)
    assert len(d2.fires("hourly")) == 1
    assert d2.liveness("hourly")["checkCount"] == checks
    assert d2.stop() == 0

    once = d2.cli("run", "--once", timeout=60)
    assert once.returncode == 0, once.stderr
    assert len(d2.fires("hourly")) == 2  # --once polls every monitor now
