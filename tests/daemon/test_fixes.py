"""Regression tests for findings on the planning/daemon/apply side, on the real daemon."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, monitor_yaml, read_json, wait_for

EVERY = "condition:\n  mode: every\n"


def test_run_once_fires_a_duplicate_once(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    # two files, one fingerprint, no allowDuplicate: used to start (and fire) both
    for name in ("d1", "d2"):
        repo.write(f"monitors.d/{name}.yml", (
            "source:\n  type: poll\n  command: [echo, same]\n  interval: 30s\n" + EVERY +
            "action:\n  type: notify\n  message: 'saw {{ event }}'\n"))
    d = daemons()
    once = d.cli("run", "--once", "--wait", "20s")
    assert once.returncode == 0, once.stderr
    assert "polled d1" in once.stderr and "polled d2" not in once.stderr
    assert len(d.fires("d1")) == 1 and d.fires("d2") == []
    assert set(d.running()) == {"d1"}
    listing = json.loads(d.cli("list", "--json").stdout)
    d2 = next(r for r in listing["monitors"] if r["name"] == "d2")
    assert d2["status"] == "duplicate (held)"
    assert d2["reason"] == ("duplicate of d1 (same fingerprint); set allowDuplicate: true if "
                            "deliberate")


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


class _ElsewhereState(Daemon):
    """A daemon whose state directory is not ``<root>/.history``."""

    def __init__(self, repo: Repo, state: Path) -> None:
        super().__init__(repo, "--demo")
        self.state_dir = state

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", "--root", str(self.repo.root),
                "--state-dir", str(self.state_dir), "--device", "test-box", *extra]


def test_demo_writes_the_file_the_demo_monitor_watches(repo: Repo, tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[2] / "monitors.d" / "demo-file.yml"
    text = shipped.read_text().replace("interval: 5s", "interval: 500ms")
    repo.write("monitors.d/demo-file.yml", text)
    state = tmp_path / "elsewhere"
    d = _ElsewhereState(repo, state)
    try:
        d.start()
        tick = repo.root / ".history" / "demo" / "tick.txt"
        wait_for(tick.exists, what="demo file below the root", log=d.log)
        assert not (state / "demo").exists()
        # the shipped monitor sees it (its first observation is the tick, or `missing` and
        # then the tick, which fires)
        def saw_tick() -> bool:
            doc = read_json(state / "monitors" / "demo-file" / "state.json") or {}
            return "demo tick" in json.dumps(doc)
        wait_for(saw_tick, what="demo-file observed the tick", log=d.log)
        assert d.stop() == 0
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(timeout=5)
    help_text = d.cli("run", "--help").stdout
    assert "<repository root>/.history/demo/tick.txt" in " ".join(help_text.split())


def test_log_names_the_monitors_that_changed_not_temp_files(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/base.yml", monitor_yaml("base", "[echo, base]"))
    d = daemons().start()
    wait_for(lambda: "base" in d.running(), what="base running", log=d.log)
    # like `sed -i`: write a temp file with no suffix, then rename it over the target
    temp = repo.user / "sedLw5Di2"
    temp.write_text(monitor_yaml("fresh", "[echo, fresh]"))
    os.replace(temp, repo.user / "fresh.yml")
    wait_for(lambda: "fresh" in d.running(), what="fresh started", log=d.log)
    wait_for(lambda: "reconciled (file change): started fresh; generation" in d.log_text(),
             what="reconciled line naming fresh", log=d.log)
    reconciled = [line for line in d.log_text().splitlines() if "reconciled" in line]
    assert not any("sedLw5Di2" in line or "monitors.d/" in line for line in reconciled), \
        reconciled
    assert d.stop() == 0
