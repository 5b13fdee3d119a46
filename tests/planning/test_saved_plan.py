"""Saved plans without a daemon: apply names a garbage plan file, and a saved plan is
stale once monitors.toml changed."""

from __future__ import annotations

import json

from tests import factories
from tests.conftest import Repo, run_cli

MON = factories.ECHO_MONITOR


def test_apply_names_a_garbage_plan_file(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    bad = repo.root / "p3.json"
    bad.write_text("garbage\n")
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"error: {bad} is not a plan file saved by `monitors plan "
                                "--out` (invalid JSON at line 1 column 1)")
    bad.write_text('{"format": "monitors-plan", "version": 1,\n  "digest": }')
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert "(invalid JSON at line 2 column 13)" in r.stderr
    bad.write_bytes(b"\xff\xfe")
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert r.stderr.strip().endswith("is not a plan file saved by `monitors plan --out` "
                                     "(not UTF-8 text)")
    assert not (repo.state / "daemon.log").exists()


def test_a_saved_plan_is_stale_when_monitors_toml_changed(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    saved = repo.root / "p.json"
    assert run_cli(["plan", "--out", str(saved)], repo=repo).exit_code == 0
    assert json.loads(saved.read_text())["settingsDigest"].startswith("sha256:")
    repo.write("monitors.toml", '[channels.phone]\nurl = "json://localhost"\n')
    r = run_cli(["apply", "--yes", str(saved)], repo=repo)
    assert r.exit_code == 1
    assert "saved plan is stale: monitors.toml changed since the plan was made" in r.stderr
    assert not (repo.state / "daemon.log").exists()
