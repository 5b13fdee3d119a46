"""Real git repositories for git-mode tests: a bare origin and a clone to follow.

Every git call runs the real ``git`` with a fixed identity and no user or system
configuration (``GIT_CONFIG_GLOBAL``/``GIT_CONFIG_NOSYSTEM``), so the machine's
settings (signing, hooks, default branch) cannot change what a test sees.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import Repo
from tests.factories import monitor_yaml

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd``; its stdout, stripped. Fails the test on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **ENV}, check=False,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def monitor(name: str, word: str = "hi") -> str:
    """A quiet monitor file: ``echo <word>`` every hour."""
    return monitor_yaml(name, f"[echo, {word}]", interval="1h")


def commit(repo: Repo, message: str, files: dict[str, str | None]) -> str:
    """Write (text) or delete (None) ``files`` below the root, commit them all; the sha."""
    for rel, text in files.items():
        path = repo.root / rel
        if text is None:
            path.unlink()
        else:
            repo.write(rel, text)
    git(repo.root, "add", "-A", "--", *files)
    git(repo.root, "commit", "-q", "-m", message)
    return git(repo.root, "rev-parse", "HEAD")


def init(repo: Repo, *, origin: Path | None = None, toml: str = 'ref = "main"\n') -> None:
    """Make ``repo`` a git repository on ``main`` (a clone of a new bare ``origin`` when
    given) with ``.history/`` ignored, and an untracked local monitors.toml whose
    ``[git]`` table is ``toml``."""
    git(repo.root, "init", "-q", "-b", "main")
    repo.write(".gitignore", ".history/\nmonitors.toml\n")
    repo.write("monitors.toml", "[git]\n" + toml)
    commit(repo, "start", {".gitignore": ".history/\nmonitors.toml\n"})
    if origin is not None:
        git(origin.parent, "init", "-q", "--bare", "-b", "main", str(origin))
        git(repo.root, "remote", "add", "origin", str(origin))
        git(repo.root, "push", "-q", "-u", "origin", "main")


def push_from_elsewhere(tmp_path: Path, origin: Path, name: str) -> str:
    """Another clone of ``origin`` (under ``tmp_path``) commits monitor ``name`` and pushes
    it to ``main``; returns the pushed commit."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(origin), str(other))
    (other / f"monitors.d/{name}.yml").write_text(monitor(name))
    git(other, "add", f"monitors.d/{name}.yml")
    git(other, "commit", "-q", "-m", f"{name} from elsewhere")
    pushed = git(other, "rev-parse", "HEAD")
    git(other, "push", "-q", "origin", "main")
    return pushed
