"""``monitors apply`` against the real daemon (a subprocess): files with errors are
named and exit 1, a saved plan is tied to the daemon it was made against, a monitor
naming an undefined channel keeps its applied version, and apply says when a first
poll is still running. (The per-field diff is tested without a daemon, in
tests/planning/test_field_diff.py: a running daemon applies an edit before a
``plan`` could show it.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.factories import monitor_yaml

NAMES = [f"m{i}" for i in range(4)]
BAD = "source:\n  type: poll\n  command: [echo, bad]\n  interval: 1:30\naction:\n  type: notify\n"


def _four(repo: Repo, daemons: Callable[..., Daemon]) -> Daemon:
    for name in NAMES:
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]",
                                                         interval="30s"))
    d = daemons().start()
    wait_for(lambda: set(d.running()) == set(NAMES), what="all running", log=d.log)
    return d


def _generation(repo: Repo) -> int:
    return int((read_json(repo.state / "running.json") or {}).get("generation", -1))


def test_apply_names_files_with_errors_and_exits_1(
        detached: Repo, daemons: Callable[..., Daemon]) -> None:
    repo = detached
    d = _four(repo, daemons)
    repo.write("monitors.d/bad.yml", BAD)
    plan = d.cli("plan")
    assert plan.returncode == 1 and "monitors.d/bad.yml" in plan.stdout, plan.stdout
    apply = d.cli("apply", "--yes")
    # was exit 0, "No changes. 4 monitors run as the repository says. 1 file has errors"
    # without naming the file
    assert apply.returncode == 1, apply.stdout + apply.stderr
    assert "monitors.d/bad.yml" in apply.stdout
    assert apply.stdout.rstrip().endswith(
        "No changes. 4 monitors run as the repository says. 1 file has errors "
        "(`monitors lint` shows them).")
    as_json = d.cli("apply", "--yes", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["plan"]["errorFiles"] == ["monitors.d/bad.yml"]
    # one bad file never holds back the others: the valid changes are applied (here by
    # a daemon apply starts, the test's daemon stopped so that it does not pick them up)
    assert d.stop() == 0
    apply = d.cli("apply", "--yes", "--wait", "10s")
    assert apply.returncode == 1, apply.stdout + apply.stderr
    assert apply.stdout.count("start: first poll ok") == 4
    assert "monitors.d/bad.yml:4:13: error: source.interval" in apply.stdout
    assert apply.stdout.rstrip().endswith(
        "Applied: 4 of 4 changes took (generation " f"{_generation(repo)}). 1 file has errors "
        "(`monitors lint` shows them).")
    assert set(read_json(repo.state / "running.json")["monitors"]) == set(NAMES)


def test_a_saved_plan_is_refused_after_the_daemon_stopped(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    d = _four(repo, daemons)
    saved = repo.root / "p.json"
    made = d.cli("plan", "--out", str(saved))
    assert made.returncode == 0 and "No changes" in made.stdout, made.stdout + made.stderr
    generation = _generation(repo)
    assert d.stop() == 0
    apply = d.cli("apply", "--yes", str(saved))
    # was accepted: "Applied: 4 of 4 changes took" (it started everything)
    assert apply.returncode == 1, apply.stdout + apply.stderr
    assert "saved plan is stale: the daemon was running when the plan was made" in apply.stderr
    assert "and is not now" in apply.stderr
    assert not (repo.state / "daemon.log").exists()  # no daemon was started
    assert _generation(repo) == generation


def test_a_monitor_naming_an_undefined_channel_keeps_its_applied_version(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s"))
    d = daemons().start()
    wait_for(lambda: "tick" in d.running(), what="tick running", log=d.log)
    applied = d.running()["tick"]["fingerprint"]
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s")
               .replace("type: notify\n", "type: notify\n  channel: nope\n"))
    wait_for(lambda: "keep tick: file is invalid" in d.log_text(), what="keep logged",
             log=d.log)
    assert "unknown channel 'nope'" in d.log_text()
    assert d.running()["tick"]["fingerprint"] == applied  # not replaced by the broken one
    plan = d.cli("plan")
    assert plan.returncode == 1
    assert "! tick is kept at its last applied version: file is invalid" in plan.stdout
    assert "action.channel: unknown channel 'nope' (known: log) [unknown-reference]" \
        in plan.stdout


def test_apply_says_a_first_poll_is_still_running(detached: Repo) -> None:
    repo = detached
    repo.write("monitors.d/hang.yml", monitor_yaml("hang", '[sleep, "30"]', interval="60s"))
    repo.write("monitors.d/quick.yml", monitor_yaml("quick", "[echo, q]", interval="60s"))
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "--root", str(repo.root), "--state-dir",
         str(repo.state), "--device", "test-box", "apply", "--yes", "--wait", "1s"],
        capture_output=True, text=True, timeout=90, cwd=repo.root,
        env={**os.environ, "NO_COLOR": "1"})
    assert p.returncode == 1, p.stdout + p.stderr  # a first poll did not finish in time
    rows = {line.split()[1]: line for line in p.stdout.splitlines()
            if line.startswith("  ")}
    # was "pending hang start: not picked up within 1s" although it was picked up
    assert rows["hang"].split()[0] == "pending"
    assert rows["hang"].endswith(" start: first poll still running after 1s")
    assert rows["quick"].endswith("start: first poll ok")
    assert "not picked up" not in p.stdout
