"""The pull-only system layer against real upstream repositories (file URLs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.config import gitrepo, gitworktree, systempull, systemrecord
from tests.authoring.conftest import BUILTIN, Upstream, git, settings_for
from tests.conftest import Repo


def test_pull_mirrors_folder_and_records(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    result = systempull.pull(s, url=upstream.url)
    assert result.added == ["pr-merge.yml"] and result.previous is None
    assert (repo.system / "pr-merge.yml").read_text() == (
        upstream.path / "monitors/pr-merge.yml").read_text()
    assert not (repo.system / "README.md").exists()
    rec = json.loads((repo.system / ".upstream.json").read_text())
    assert rec["commit"] == git(upstream.path, "rev-parse", "HEAD")
    assert rec["tree"] == git(upstream.path, "rev-parse", "HEAD:monitors")
    assert rec["digest"].startswith("sha256:") and rec["url"] == upstream.url
    assert systemrecord.system_modifications(s) == []


def test_pull_follows_update_delete_and_nested(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    systempull.pull(s, url=upstream.url)
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="10m"))
    upstream.write("monitors/extra/other.yml", BUILTIN.format(interval="1h"))
    first = systempull.pull(s, url=upstream.url).commit
    assert "10m" not in (repo.system / "pr-merge.yml").read_text()  # uncommitted: not pulled
    upstream.commit("bump")
    r = systempull.pull(s, url=upstream.url)
    assert r.previous == first and r.changed == ["pr-merge.yml"]
    assert r.added == ["extra/other.yml"]
    upstream.remove("monitors/extra/other.yml")
    upstream.commit("drop")
    r = systempull.pull(s, url=upstream.url)
    assert r.removed == ["extra/other.yml"] and not (repo.system / "extra").exists()
    record = (repo.system / ".upstream.json").read_bytes()
    again = systempull.pull(s, url=upstream.url)
    assert again.unchanged
    assert (repo.system / ".upstream.json").read_bytes() == record


def test_pull_refuses_local_modifications_naming_them(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    systempull.pull(s, url=upstream.url)
    (repo.system / "pr-merge.yml").write_text("edited: true\n")
    repo.write("system/mine.yml", "x: 1\n")
    mods = systemrecord.system_modifications(s)
    assert mods == [repo.system / "mine.yml", repo.system / "pr-merge.yml"]
    with pytest.raises(gitrepo.GitError) as e:
        systempull.pull(s, url=upstream.url)
    msg = str(e.value)
    assert "system/mine.yml" in msg and "system/pr-merge.yml" in msg
    assert "monitors.d/" in msg and "overlay" in msg and "--force" in msg
    assert (repo.system / "pr-merge.yml").read_text() == "edited: true\n"  # nothing lost
    systempull.pull(s, url=upstream.url, force=True)
    assert not (repo.system / "mine.yml").exists()
    assert systemrecord.system_modifications(s) == []


def test_deleted_builtin_is_a_modification(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    systempull.pull(s, url=upstream.url)
    (repo.system / "pr-merge.yml").unlink()
    assert systemrecord.system_modifications(s) == [repo.system / "pr-merge.yml"]


def test_first_pull_refuses_to_overwrite_unrecorded_files(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    repo.write("system/hand.yml", "x: 1\n")
    assert systemrecord.system_modifications(s) == []  # no record: nothing to compare with
    with pytest.raises(gitrepo.GitError, match=r"system/hand\.yml"):
        systempull.pull(s, url=upstream.url)
    # an identical pre-existing copy is not a conflict
    (repo.system / "hand.yml").unlink()
    (repo.system / "pr-merge.yml").write_bytes((upstream.path / "monitors/pr-merge.yml")
                                               .read_bytes())
    assert systempull.pull(s, url=upstream.url).unchanged


def test_force_pushed_upstream_is_followed(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="7m"))
    doomed = upstream.commit("to be rewritten")
    systempull.pull(s, url=upstream.url)
    assert systemrecord.read_record(s).commit == doomed  # type: ignore[union-attr]
    git(upstream.path, "reset", "-q", "--hard", "HEAD~1")
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="9m"))
    new = upstream.commit("rewritten history")
    st = systempull.status(s)
    assert st.tip == new and st.ahead == 1 and st.behind == 1
    r = systempull.pull(s, url=upstream.url)
    assert r.commit == new and "9m" in (repo.system / "pr-merge.yml").read_text()


def test_ref_branch_tag_commit_and_unknown(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    first = git(upstream.path, "rev-parse", "HEAD")
    git(upstream.path, "tag", "v1")
    git(upstream.path, "checkout", "-q", "-b", "next")
    upstream.write("monitors/pr-merge.yml", BUILTIN.format(interval="2m"))
    nxt = upstream.commit("next")
    git(upstream.path, "checkout", "-q", "main")
    assert systempull.pull(s, url=upstream.url, ref="next").commit == nxt
    assert systempull.pull(s, url=upstream.url, ref="v1").commit == first
    assert systempull.pull(s, url=upstream.url, ref=nxt).commit == nxt
    assert systempull.pull(s, url=upstream.url).commit == first  # default branch
    with pytest.raises(gitrepo.GitError, match="no branch, tag or commit 'nope'"):
        systempull.pull(s, url=upstream.url, ref="nope")


def test_settings_section_and_missing_folder(repo: Repo, upstream: Upstream) -> None:
    repo.write("monitors.toml", f'[system]\nurl = "{upstream.url}"\npath = "elsewhere"\n')
    with pytest.raises(gitrepo.GitError, match="no folder elsewhere/"):
        systempull.pull(settings_for(repo))
    repo.write("monitors.toml", f'[system]\nurl = "{upstream.url}"\nref = "main"\n')
    assert systempull.pull(settings_for(repo)).added == ["pr-merge.yml"]


def test_no_upstream_and_unreachable(repo: Repo, tmp_path: Path) -> None:
    s = settings_for(repo)
    with pytest.raises(Exception, match=r"set \[system\] url"):
        systempull.pull(s)
    with pytest.raises(gitrepo.GitError, match="cannot fetch"):
        systempull.pull(s, url=(tmp_path / "nowhere").as_uri())
    st = systempull.status(s)
    assert st.upstream is None and st.record is None


def test_author_and_commit(repo: Repo, git_identity: Path) -> None:
    s = settings_for(repo)
    assert gitworktree.author(s) == "Ada Lovelace <ada@example.org>"
    with pytest.raises(gitrepo.GitError, match="not inside a git repository"):
        gitworktree.commit(s, [repo.overlays / "x.yml"], "msg")
    git(repo.root, "init", "-q")
    other = repo.write("monitors.d/other.yml", "x: 1\n")
    git(repo.root, "add", str(other))
    f = repo.write("monitors.d/overlays/x.yml", "monitor: x\npause: {}\n")
    sha = gitworktree.commit(s, [f], "pause x")
    assert sha and git(repo.root, "log", "-1", "--format=%s%n%an") == "pause x\nAda Lovelace"
    assert git(repo.root, "show", "--name-only", "--format=", "HEAD") == "monitors.d/overlays/x.yml"
    assert "A  monitors.d/other.yml" in git(repo.root, "status", "--porcelain")  # still staged
    f.unlink()
    assert gitworktree.commit(s, [f], "resume x")
    assert gitworktree.commit(s, [f], "again") is None
    git_identity.write_text("")
    assert gitworktree.author(s) == ""


def test_modification_problems_for_lint(repo: Repo, upstream: Upstream) -> None:
    s = settings_for(repo)
    systempull.pull(s, url=upstream.url)
    assert systemrecord.modification_problems(s) == []
    (repo.system / "pr-merge.yml").write_text("x: 1\n")
    (probs,) = systemrecord.modification_problems(s, cwd=repo.root)
    assert probs.format().startswith("system/pr-merge.yml:1:1: error: changed or added")
    assert probs.rule == "system-modified"
    (repo.system / ".upstream.json").write_text("{")
    (bad,) = systemrecord.modification_problems(s, cwd=repo.root)
    assert bad.file == "system/.upstream.json" and "system pull --force" in bad.message
