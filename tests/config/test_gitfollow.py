"""``[git]`` settings: schema checks, the local/shared split, jittered fetches, and the
export of a commit's files from the object database (never the working tree)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from reconciler import settings
from reconciler.config import gitfollow, gitrepo, settings_check
from tests.conftest import Repo
from tests.daemon.gitrepos import commit, git, init, monitor


def _problems(repo: Repo, toml: str) -> list[str]:
    repo.write("monitors.toml", toml)
    cfg = settings.load(root=repo.root, state_dir=repo.state, device="d")
    return [p.format() for p in settings_check.settings_problems(cfg)]


@pytest.mark.parametrize("toml, expected", [
    ('[git]\nref = "main"\nfetch = "30s"\nverify = "signed"\n', None),
    ('[git]\nfetch = "1m"\n', "ref"),
    ('[git]\nref = "main"\nverify = "maybe"\n', "git.verify"),
    ('[git]\nref = "main"\nfetch = "often"\n', "git.fetch"),
    ('[git]\nref = "main"\nbranch = "x"\n', "branch"),
])
def test_git_settings_are_checked_by_the_schema(repo: Repo, toml: str,
                                                 expected: str | None) -> None:
    found = _problems(repo, toml)
    if expected is None:
        assert found == []
    else:
        assert found and expected in found[0], found


def test_local_settings_win_and_device_settings_never_come_from_the_tree() -> None:
    local = {"device": "edge-1", "git": {"ref": "main"}, "channels": {"ops": {"url": "L"}}}
    shared = {"device": "other", "stateDir": "/tmp/x", "git": {"ref": "evil"},
              "channels": {"ops": {"url": "S"}, "dev": {"url": "D"}},
              "agents": {"a": {"argv": ["x"]}}}
    merged = gitfollow.merged_toml(local, shared)
    assert merged["device"] == "edge-1" and merged["git"] == {"ref": "main"}
    assert "stateDir" not in merged
    assert merged["channels"] == {"ops": {"url": "L"}, "dev": {"url": "D"}}
    assert merged["agents"] == {"a": {"argv": ["x"]}}


def test_fetch_intervals_are_jittered_within_ten_percent() -> None:
    rng = random.Random(7)
    delays = [gitfollow.jittered(60.0, rng) for _ in range(200)]
    assert all(54.0 <= d <= 66.0 for d in delays)
    assert len({round(d, 3) for d in delays}) > 100


def test_export_reads_the_commit_not_the_working_tree_or_index(repo: Repo) -> None:
    init(repo)
    sha = commit(repo, "a", {"monitors.d/a.yml": monitor("a"),
                             "fleet.yaml": "devices: []\n"})
    repo.write("monitors.d/a.yml", monitor("a", "edited"))  # modified, staged
    git(repo.root, "add", "monitors.d/a.yml")
    repo.write("monitors.d/b.yml", monitor("b"))  # untracked
    index = (repo.root / ".git/index").read_bytes()
    cfg = settings.load(root=repo.root, state_dir=repo.state, device="d")
    git_cfg = gitfollow.git_settings(cfg)
    assert git_cfg is not None
    target = gitfollow.Follower(cfg, git_cfg).export(sha)
    exported = target.settings.user_dir
    assert sorted(p.name for p in exported.iterdir()) == ["a.yml"]
    assert "edited" not in (exported / "a.yml").read_text()
    assert target.settings.fleet_file.read_text() == "devices: []\n"
    assert target.settings.device == "d" and target.settings.state_dir == cfg.state_dir
    assert (repo.root / ".git/index").read_bytes() == index
    assert "edited" in (repo.root / "monitors.d/a.yml").read_text()


def test_a_missing_ref_is_one_line(repo: Repo, tmp_path: Path) -> None:
    init(repo)
    repo_obj = gitrepo.open_repository(repo.root)
    with pytest.raises(gitrepo.GitError, match="'nope' names no commit"):
        gitrepo.resolve_ref(repo_obj, "nope")
    with pytest.raises(gitrepo.GitError, match="not inside a git repository"):
        gitrepo.open_repository(tmp_path / "..")
