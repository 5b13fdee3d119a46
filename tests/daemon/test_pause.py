"""Pauses on the real daemon: an expired pause resumes at its expiry (not at the next
resync), the next expiry is the earliest future one, and a pause by label is not held
by the mass-stop guard."""

from __future__ import annotations

import datetime as dt
import json
import math
import time
import types
from collections.abc import Callable
from pathlib import Path

from reconciler import snapshot
from reconciler.config import overlays
from reconciler.model import Pause
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def _iso(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat(timespec="seconds")


def test_expired_pause_resumes_at_expiry_not_at_the_next_resync(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/p.yml", monitor_yaml("p", "[echo, p]", interval="1s"))
    d = daemons("--resync", "60s").start()  # the last --resync wins: 60 s
    wait_for(lambda: "p" in d.running(), what="p running", log=d.log)
    until = math.ceil(time.time()) + 6.0
    repo.write("monitors.d/overlays/p.yml",
               f"monitor: p\npause:\n  reason: test\n  until: '{_iso(until)}'\n")
    wait_for(lambda: "p" not in d.running(), timeout=max(0.5, until - time.time() - 0.3),
             what="p paused (stopped) before its pause expires", log=d.log)
    # used to resume only at the next periodic resync, up to 60 s late
    wait_for(lambda: "p" in d.running(), timeout=(until - time.time()) + 6.0,
             what="p resumed within a few seconds of its pause expiry", log=d.log)
    assert time.time() >= until
    wait_for(lambda: "reconciled (pause expiry)" in d.log_text(), what="the expiry log line",
             log=d.log)
    assert d.stop() == 0


def test_next_pause_expiry_is_the_earliest_future_until() -> None:
    def overlay(name: str, until: str | None) -> overlays.Overlay:
        return overlays.Overlay(name, Path(f"{name}.yml"), Pause(reason="r", until=until), None)

    result = types.SimpleNamespace(overlays={
        "a": overlay("a", "2026-01-01T00:00:10Z"), "b": overlay("b", "2026-01-01T00:00:05Z"),
        "c": overlay("c", "2026-01-01T00:00:01Z"), "d": overlay("d", None),
        "e": overlay("e", "not a time")})
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    assert snapshot.next_pause_expiry(result, now=base + 2) == base + 5
    assert snapshot.next_pause_expiry(result, now=base + 5) == base + 10
    assert snapshot.next_pause_expiry(result, now=base + 10) is None


def test_pause_by_label_is_not_held_by_the_mass_stop_guard(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    names = [f"m{i}" for i in range(5)]
    for i, name in enumerate(names):
        labels = "labels: {team: demo}\n" if i < 3 else "labels: {team: ops}\n"
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]",
                                                         interval="1s", extra=labels))
    d = daemons().start()
    wait_for(lambda: set(d.running()) == set(names), what="all running", log=d.log)
    paused = d.cli("pause", "-l", "team=demo")
    assert paused.returncode == 0, paused.stderr
    # the three paused monitors really stop (they used to be held and keep firing)
    wait_for(lambda: set(d.running()) == {"m3", "m4"}, what="paused ones stopped", log=d.log)
    assert "HELD" not in d.log_text()
    rows = {r["name"]: r for r in json.loads(d.cli("list", "--json").stdout)["monitors"]}
    assert {n: rows[n]["status"] for n in names} == {
        "m0": "paused", "m1": "paused", "m2": "paused", "m3": "running", "m4": "running"}
    plan = d.cli("plan", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout  # nothing left to do

    def m3_polls_twice_more() -> None:
        start = d.liveness("m3").get("checkCount", 0)
        wait_for(lambda: d.liveness("m3").get("checkCount", 0) >= start + 2,
                 what="m3 polls on", log=d.log)

    m3_polls_twice_more()  # any liveness of m0 still in memory is flushed by now
    checks = d.liveness("m0").get("checkCount", 0)
    m3_polls_twice_more()
    assert d.liveness("m0").get("checkCount", 0) == checks  # m0 no longer polls
    assert d.stop() == 0
