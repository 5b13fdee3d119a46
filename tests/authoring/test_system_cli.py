"""`monitors system pull|status` end to end, and a pulled update under an existing pause."""

from __future__ import annotations

import json
from pathlib import Path

from reconciler.config import loader
from tests.authoring.conftest import BUILTIN, Upstream, git, settings_for
from tests.conftest import Repo, run_cli


def test_pull_status_and_refusal(repo: Repo, upstream: Upstream) -> None:
    repo.write("monitors.toml", f'[system]\nurl = "{upstream.url}"\n')
    r = run_cli(["system", "status"], repo=repo)
    assert r.exit_code == 0 and "pulled:   never" in r.stdout
    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "+ pr-merge.yml" in r.stdout
    r = run_cli(["system", "pull"], repo=repo)
    assert "up to date" in r.stdout
    upstream.write("monitors/new.yml", BUILTIN.format(interval="1h"))
    tip = upstream.commit("new")
    r = run_cli(["system", "status", "--json"], repo=repo)
    st = json.loads(r.stdout)
    assert (st["tip"], st["behind"], st["ahead"], st["modifications"]) == (tip, 1, 0, [])
    (repo.system / "pr-merge.yml").write_text("# local tweak\n")
    r = run_cli(["system", "status"], repo=repo)
    assert "local modifications (system/ is pull-only" in r.stdout and "system/pr-merge.yml" \
        in r.stdout
    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1 and "system/ was modified locally: system/pr-merge.yml" \
        in r.stderr and "Traceback" not in r.output
    assert (repo.system / "pr-merge.yml").read_text() == "# local tweak\n"
    assert not (repo.system / "new.yml").exists()
    r = run_cli(["system", "pull", "--force", "--json"], repo=repo)
    out = json.loads(r.stdout)
    assert out["commit"] == tip and out["added"] == ["new.yml"] and out["changed"] == [
        "pr-merge.yml"]


def test_pull_errors_are_one_line(repo: Repo, tmp_path: object) -> None:
    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 1 and "set [system] url in monitors.toml or pass --from URL" in r.stderr
    r = run_cli(["system", "pull", "--from", "file:///nonexistent/upstream"], repo=repo)
    assert r.exit_code == 1 and "cannot fetch file:///nonexistent/upstream" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_pulled_update_under_existing_pause(repo: Repo, upstream: Upstream) -> None:
    assert run_cli(["system", "pull", "--from", upstream.url], repo=repo).exit_code == 0
    r = run_cli(["pause", "pr-merge", "--reason", "merging by hand"], repo=repo)
    assert r.exit_code == 0, r.output
    overlay_before = (repo.overlays / "pr-merge.yml").read_bytes()
    old = loader.load(settings_for(repo)).monitors["pr-merge"]
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="15m"))
    upstream.commit("slower")
    r = run_cli(["system", "pull", "--from", upstream.url], repo=repo)
    assert r.exit_code == 0, r.output
    assert "~ pr-merge.yml  (paused by monitors.d/overlays/pr-merge.yml" in r.stdout
    assert (repo.overlays / "pr-merge.yml").read_bytes() == overlay_before
    new = loader.load(settings_for(repo)).monitors["pr-merge"]
    assert new.pause is not None and new.pause.reason == "merging by hand"
    assert new.source.interval == 900.0 and new.fingerprint != old.fingerprint
    r = run_cli(["system", "status", "--json"], repo=repo)
    assert json.loads(r.stdout)["modifications"] == []  # the overlay is not in system/


def test_force_pushed_upstream_cli(repo: Repo, upstream: Upstream) -> None:
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="7m"))
    upstream.commit("doomed")
    assert run_cli(["system", "pull", "--from", upstream.url], repo=repo).exit_code == 0
    git(upstream.path, "reset", "-q", "--hard", "HEAD~1")
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="8m"))
    upstream.commit("rewritten")
    git(upstream.path, "gc", "-q", "--prune=now")
    r = run_cli(["system", "status"], repo=repo)
    assert "1 behind, 1 ahead (the upstream was rewritten" in r.stdout, r.output
    r = run_cli(["system", "pull"], repo=repo)  # the recorded upstream is reused
    assert r.exit_code == 0, r.output
    assert "8m" in (repo.system / "pr-merge.yml").read_text()


def test_fetch_failure_names_the_cause(repo: Repo, tmp_path: Path) -> None:
    # bug: git's stderr was cut to its last line: "... and the repository exists."
    missing = tmp_path / "nonexistent"
    r = run_cli(["system", "pull", "--from", str(missing)], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"error: system pull: cannot fetch {missing}: "
                                "no such file or directory")
    not_git = tmp_path / "plain"
    not_git.mkdir()
    r = run_cli(["system", "pull", "--from", str(not_git)], repo=repo)
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1
    assert f"cannot fetch {not_git}: '{not_git}' does not appear to be a git repository" \
        in r.stderr
    assert "repository exists" not in r.stderr
    r = run_cli(["system", "pull", "--from", missing.as_uri()], repo=repo)
    assert r.exit_code == 1 and r.stderr.strip().endswith(
        f"cannot fetch {missing.as_uri()}: {missing}: no such file or directory")
    r = run_cli(["system", "status"], repo=repo)  # the last --from is not recorded
    assert r.exit_code == 0
