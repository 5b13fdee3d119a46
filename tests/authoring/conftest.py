"""Fixtures for the authoring tests: a git identity and real upstream repositories."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler import settings as settings_mod
from tests.conftest import Repo


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` and return stdout (raises on failure, with stderr)."""
    p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"git {' '.join(args)}: {p.stderr}"
    return p.stdout.strip()


@pytest.fixture(autouse=True)
def git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private global git config with an identity; no system config."""
    cfg = tmp_path / "gitconfig"
    cfg.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n"
                   "[init]\n\tdefaultBranch = main\n[protocol \"file\"]\n\tallow = always\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_DIR", raising=False)
    yield cfg


@dataclass
class Upstream:
    """A real git repository in a temp dir serving built-ins under ``monitors/``."""

    path: Path

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def write(self, rel: str, text: str) -> None:
        f = self.path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")

    def remove(self, rel: str) -> None:
        (self.path / rel).unlink()

    def commit(self, message: str) -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


BUILTIN = """
    description: Merge green PRs
    source:
      type: poll
      command: gh pr list --json number
      interval: {interval}
    action:
      type: notify
"""


def make_upstream(tmp_path: Path, monitors: dict[str, str]) -> Upstream:
    """A git upstream at ``tmp_path/upstream`` with ``monitors/<file>`` for each entry of
    ``monitors`` (file name -> interval of the ``BUILTIN`` monitor) and a README outside
    the folder, committed once."""
    path = tmp_path / "upstream"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    up = Upstream(path)
    up.write("README.md", "upstream\n")
    for file, interval in monitors.items():
        up.write(f"monitors/{file}", BUILTIN.format(interval=interval))
    up.commit("initial")
    return up


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    """An upstream with ``monitors/pr-merge.yml`` and a README outside the folder."""
    return make_upstream(tmp_path, {"pr-merge.yml": "5m"})


def settings_for(repo: Repo) -> settings_mod.Settings:
    """Settings of a test repository (state in ``.history``, device ``test-box``)."""
    return settings_mod.load(root=repo.root, state_dir=repo.state, device="test-box")


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` except the state dir -> its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".history" not in p.parts and ".git" not in p.parts}


@pytest.fixture
def reap_daemon(repo: Repo) -> Iterator[Repo]:
    """Stop (by pid) a daemon that ``--apply`` started on ``repo``, after the test."""
    import os
    import signal
    import time

    from reconciler.state import lock

    yield repo
    pid = lock.holder_pid(repo.state)
    if pid is None or pid == os.getpid():
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and lock.is_locked(repo.state):
        time.sleep(0.05)
    if lock.is_locked(repo.state):
        os.kill(pid, signal.SIGKILL)
