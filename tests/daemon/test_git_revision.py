"""The git revision the daemon reports is cached until HEAD, the index or the layers
change; a broken git gives no revision and logs at debug."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from reconciler import snapshot
from reconciler.config import gitworktree


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                          text=True, timeout=30).stdout.strip()


def test_git_revision_is_cached_until_head_index_or_layers_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "a.yml").write_text("a: 1\n")
    _git(root, "add", "a.yml")
    _git(root, "commit", "-q", "-m", "one")
    calls: list[Path] = []
    real = gitworktree._revision

    def counting(path: Path) -> tuple[str | None, bool]:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(gitworktree, "_revision", counting)
    sha1 = _git(root, "rev-parse", "HEAD")

    def settled(digest: str) -> tuple[str | None, bool]:
        """Call until cached (``git status`` may refresh the index once)."""
        for _ in range(3):
            n = len(calls)
            answer = snapshot.git_revision(root, digest=digest)
            if len(calls) == n:
                return answer
        pytest.fail(f"never cached: {len(calls)} git runs")

    assert snapshot.git_revision(root, digest="d1") == (sha1, False)
    assert settled("d1") == (sha1, False)
    # a layer file edited (the loader digest changes): recomputed
    (root / "a.yml").write_text("a: 2\n")
    n = len(calls)
    assert snapshot.git_revision(root, digest="d2") == (sha1, True)
    assert len(calls) == n + 1
    assert settled("d2") == (sha1, True)
    # staged (the index changes), same digest: recomputed
    _git(root, "add", "a.yml")
    n = len(calls)
    assert snapshot.git_revision(root, digest="d2") == (sha1, True)
    assert len(calls) == n + 1
    # committed (HEAD's ref changes), same digest: the new commit, clean
    _git(root, "commit", "-q", "-m", "two")
    sha2 = _git(root, "rev-parse", "HEAD")
    assert sha2 != sha1
    assert snapshot.git_revision(root, digest="d2") == (sha2, False)
    assert settled("d2") == (sha2, False)
    # without a digest nothing is cached
    n = len(calls)
    snapshot.git_revision(root)
    snapshot.git_revision(root)
    assert len(calls) == n + 2


def test_broken_git_gives_no_revision_and_logs_at_debug(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("garbage\n")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    logger = logging.getLogger("monitors.git")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        assert snapshot.git_revision(root, digest="x") == (None, False)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    assert any("cannot read the git revision" in r.getMessage() for r in records)
