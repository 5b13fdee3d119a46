"""The first ``monitors system pull`` of a fresh clone that ships built-ins in ``system/``
(committed, no ``system/.upstream.json`` yet): git's ``HEAD`` says which files are local
modifications. Real git repositories in temp dirs, file URLs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reconciler.config import gitrepo, systempull, systemrecord
from tests.authoring.conftest import BUILTIN, Upstream, git, make_upstream, settings_for
from tests.conftest import Repo, run_cli


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    """An upstream whose ``monitors/`` holds a newer ``disk-headroom.yml`` than the clone's."""
    return make_upstream(tmp_path, {"disk-headroom.yml": "10m", "pr-merge.yml": "1h"})


def make_clone(tmp_path: Path, upstream: Upstream, *, files: dict[str, str] | None = None,
               name: str = "clone") -> Repo:
    """A project repository committed with ``system/`` files and no record, then cloned
    fresh (as every new user gets it)."""
    origin = tmp_path / "origin"
    if not origin.exists():
        origin.mkdir()
        git(origin, "init", "-q", "-b", "main")
        project = Repo(origin)
        project.write("monitors.toml", f'[system]\nurl = "{upstream.url}"\n')
        project.write("monitors.d/overlays/.keep", "")
        project.write(".gitignore", ".history/\n")
        for rel, text in (files or {"system/disk-headroom.yml": BUILTIN.format(
                interval="5m")}).items():
            project.write(rel, text)
        git(origin, "add", "-A")
        git(origin, "commit", "-q", "-m", "ship built-ins")
    clone = tmp_path / name
    git(tmp_path, "clone", "-q", origin.as_uri(), str(clone))
    return Repo(clone)


def test_first_pull_of_a_fresh_clone_replaces_committed_builtins(
        tmp_path: Path, upstream: Upstream) -> None:
    # the newcomer's report: refused with "system/ was modified locally"
    repo = make_clone(tmp_path, upstream)
    assert not (repo.system / ".upstream.json").exists()
    r = run_cli(["system", "status"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "pulled:   never; system/ holds 1 file committed in this repository" in r.stdout
    assert "recorded commit unknown" not in r.stdout
    assert "not pulled yet" in r.stdout and "local modifications: none" in r.stdout
    st = json.loads(run_cli(["system", "status", "--json"], repo=repo).stdout)
    assert st["committedFiles"] == 1 and st["commit"] is None and st["modifications"] == []

    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "~ disk-headroom.yml" in r.stdout and "+ pr-merge.yml" in r.stdout
    assert "10m" in (repo.system / "disk-headroom.yml").read_text()
    record = json.loads((repo.system / ".upstream.json").read_text())
    assert record["commit"] == git(upstream.path, "rev-parse", "HEAD")
    r = run_cli(["system", "status"], repo=repo)
    assert "upstream tip:" in r.stdout and "up to date" in r.stdout
    assert "local modifications: none" in r.stdout


def test_first_pull_refuses_an_uncommitted_edit_of_a_committed_file(
        tmp_path: Path, upstream: Upstream) -> None:
    repo = make_clone(tmp_path, upstream)
    edited = BUILTIN.format(interval="2m")
    (repo.system / "disk-headroom.yml").write_text(edited)
    r = run_cli(["system", "status"], repo=repo)
    assert "pulled:   never; system/ holds 0 files committed" in r.stdout
    assert "local modifications (system/ is pull-only" in r.stdout
    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 1
    assert "system/ was modified locally: system/disk-headroom.yml" in r.stderr
    assert "--force" in r.stderr and "Traceback" not in r.output
    assert (repo.system / "disk-headroom.yml").read_text() == edited  # nothing lost
    assert not (repo.system / ".upstream.json").exists()
    git(repo.root, "add", "system/disk-headroom.yml")  # staged counts too (vs HEAD)
    assert run_cli(["system", "pull"], repo=repo).exit_code == 1
    assert run_cli(["system", "pull", "--force"], repo=repo).exit_code == 0
    assert "10m" in (repo.system / "disk-headroom.yml").read_text()


@pytest.mark.parametrize("stage", [False, True])
def test_first_pull_refuses_an_untracked_file(tmp_path: Path, upstream: Upstream,
                                              stage: bool) -> None:
    repo = make_clone(tmp_path, upstream)
    repo.write("system/mine.yml", "x: 1\n")
    if stage:
        git(repo.root, "add", "system/mine.yml")
    with pytest.raises(gitrepo.GitError) as e:
        systempull.pull(settings_for(repo))
    assert "system/mine.yml" in str(e.value) and "disk-headroom" not in str(e.value)
    assert (repo.system / "mine.yml").read_text() == "x: 1\n"
    assert "5m" in (repo.system / "disk-headroom.yml").read_text()


def test_untracked_file_equal_to_upstream_is_not_at_risk(tmp_path: Path,
                                                         upstream: Upstream) -> None:
    repo = make_clone(tmp_path, upstream)
    shutil.copy(upstream.path / "monitors/pr-merge.yml", repo.system / "pr-merge.yml")
    result = systempull.pull(settings_for(repo))
    assert result.changed == ["disk-headroom.yml"] and result.added == []


def test_committed_file_missing_upstream_is_removed_and_git_keeps_it(
        tmp_path: Path, upstream: Upstream) -> None:
    repo = make_clone(tmp_path, upstream, files={
        "system/disk-headroom.yml": BUILTIN.format(interval="5m"),
        "system/old/retired.yml": BUILTIN.format(interval="1d")})
    result = systempull.pull(settings_for(repo))
    assert result.removed == ["old/retired.yml"] and not (repo.system / "old").exists()
    assert "1d" in git(repo.root, "show", "HEAD:system/old/retired.yml")


def test_deleted_committed_file_is_restored_without_refusal(tmp_path: Path,
                                                            upstream: Upstream) -> None:
    repo = make_clone(tmp_path, upstream)
    (repo.system / "disk-headroom.yml").unlink()
    result = systempull.pull(settings_for(repo))
    assert result.added == ["disk-headroom.yml", "pr-merge.yml"]


def test_after_a_record_exists_the_manifest_rules_not_git(tmp_path: Path,
                                                          upstream: Upstream) -> None:
    repo = make_clone(tmp_path, upstream)
    s = settings_for(repo)
    systempull.pull(s)
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-q", "-m", "record the pull")
    (repo.system / "pr-merge.yml").write_text("# tweak\n")
    git(repo.root, "commit", "-q", "-am", "commit a local tweak")  # committed, still modified
    assert systemrecord.system_modifications(s) == [repo.system / "pr-merge.yml"]
    with pytest.raises(gitrepo.GitError, match=r"modified locally: system/pr-merge\.yml"):
        systempull.pull(s)
    st = systempull.status(s, fetch_upstream=False)
    assert st.baseline is None and st.modifications == [repo.system / "pr-merge.yml"]


def test_repository_without_commits_refuses_its_files(repo: Repo, upstream: Upstream) -> None:
    git(repo.root, "init", "-q", "-b", "main")
    repo.write("system/disk-headroom.yml", BUILTIN.format(interval="5m"))
    base = gitrepo.baseline(settings_for(repo))
    assert base.checkout and base.committed == [] and base.modified == ["disk-headroom.yml"]
    with pytest.raises(gitrepo.GitError, match=r"modified locally: system/disk-headroom\.yml"):
        systempull.pull(settings_for(repo), url=upstream.url)


def test_not_a_checkout_without_record_still_refuses(repo: Repo, upstream: Upstream) -> None:
    repo.write("monitors.toml", f'[system]\nurl = "{upstream.url}"\n')
    repo.write("system/disk-headroom.yml", BUILTIN.format(interval="5m"))
    assert not gitrepo.baseline(settings_for(repo)).checkout
    r = run_cli(["system", "status", "--no-fetch"], repo=repo)
    assert "pulled:   never; system/ holds 1 file and this is not a git checkout" in r.stdout
    r = run_cli(["system", "pull"], repo=repo)
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "never pulled" in r.stderr and "not a git checkout" in r.stderr
    assert "system/disk-headroom.yml" in r.stderr and "--force" in r.stderr
    assert "5m" in (repo.system / "disk-headroom.yml").read_text()
    assert run_cli(["system", "pull", "--force"], repo=repo).exit_code == 0
    assert "10m" in (repo.system / "disk-headroom.yml").read_text()
