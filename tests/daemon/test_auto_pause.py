"""Auto-pause on the real daemon: it stops the evaluator at once, and auto-paused or
stopped monitors are never shown as stalled."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for

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
    # running.json is published just before the reconcile's log line: wait for the line
    wait_for(lambda: "reconciled (auto-pause)" in d.log_text(), timeout=5,
             what="auto-pause reconcile logged", log=d.log)
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
