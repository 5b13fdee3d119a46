"""``monitors plan`` through the CLI on a temp repository without a daemon."""

from __future__ import annotations

import json

from tests.conftest import Repo, run_cli

MON = """\
source:
  type: poll
  command: [echo, {word}]
  interval: 30s
action:
  type: notify
"""


def test_plan_without_daemon(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    repo.write("monitors.d/beta.yml", MON.format(word="beta") + "device: box-2\n")
    repo.write("monitors.d/gamma.yml", MON.format(word="gamma"))
    repo.write("monitors.d/overlays/gamma.yml",
               "monitor: gamma\npause:\n  reason: too loud\n")
    repo.write("monitors.d/delta.yml", MON.format(word="delta"))
    repo.write("monitors.d/overlays/delta.yml",
               "monitor: delta\npause:\n  until: '2020-01-01T00:00:00Z'\n")
    repo.write("monitors.d/broken.yml", "source: [unclosed\n")
    r = run_cli(["plan"], repo=repo)
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "The daemon is not running: running state is empty" in out
    assert "+ alpha will be started: new file monitors.d/alpha.yml" in out
    assert "+ delta will be started: pause expired at 2020-01-01T00:00:00Z " \
           "(monitors.d/overlays/delta.yml)" in out
    assert "beta: owner is box-2: pinned to box-2" in out
    assert 'gamma: paused by overlay' in out and 'reason "too loud"' in out
    assert "broken: file is invalid, never applied: " in out
    assert "\x1b[" not in out
    assert out.rstrip().endswith(
        "Plan: 2 to start, 0 to replace, 0 to update, 0 to stop, 0 unchanged.")

    assert run_cli(["plan", "--detailed-exitcode"], repo=repo).exit_code == 2
    doc = json.loads(run_cli(["plan", "--json"], repo=repo).stdout)
    assert doc["format"] == "monitors-plan" and doc["version"] == 1
    assert doc["daemon"]["running"] is False and doc["generation"] == 0
    assert {c["name"]: c["action"] for c in doc["changes"]} == {"alpha": "start",
                                                                "delta": "start"}
    assert doc["digest"].startswith("sha256:")

    out_file = repo.root / "saved.json"
    r = run_cli(["plan", "--out", str(out_file)], repo=repo)
    assert r.exit_code == 0 and "Saved the plan" in r.stdout
    saved = json.loads(out_file.read_text())
    assert saved["desiredDigest"] == doc["desiredDigest"]
    assert saved["commit"] is None  # not a git checkout


def test_plan_with_nothing_is_no_changes(repo: Repo) -> None:
    r = run_cli(["plan", "--detailed-exitcode"], repo=repo)
    assert r.exit_code == 0
    assert "No changes. 0 monitors run as the repository says." in r.stdout
