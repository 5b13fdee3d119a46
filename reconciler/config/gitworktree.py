"""The configuration repository's working tree, through GitPython (local mode).

``revision`` (the checkout's commit and whether the layer files are dirty, cached on cheap
stats of ``.git``), ``git_dir``/``common_dir`` (where a checkout's git directory is:
linked worktrees and submodules included), ``author`` and ``commit`` (``pause --commit``
and friends commit exactly the files they wrote). Every git failure is one
``gitrepo.GitError`` line. Must not: read or write anything outside the checkout; no
click, no printing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reconciler.settings import Settings

log = logging.getLogger("monitors.git")


# -- the configuration repository: author and --commit --------------------------------------


def author(settings: Settings) -> str:
    """``Name <email>`` from git config (repository, then global); ``""`` when unset
    or when git is unavailable."""
    from reconciler.config import gitrepo

    git = gitrepo.git_module()
    try:
        g = git.Git(str(settings.root))
    except Exception:
        return ""

    def get(key: str) -> str:
        try:
            return str(g.config("--get", key)).strip()
        except Exception:
            return ""

    name, email = get("user.name"), get("user.email")
    if name and email:
        return f"{name} <{email}>"
    return name or (f"<{email}>" if email else "")


def commit(settings: Settings, paths: Iterable[Path], message: str) -> str | None:
    """Commit exactly ``paths`` (written or deleted) in the repository holding the root.

    Other staged changes are left staged and out of the commit (``git commit --only``).

    Returns:
        The new commit id, or None when none of ``paths`` had a change to commit.

    Raises:
        GitError: not a git repository, or git refused (no identity, hooks, ...).
    """
    from reconciler.config import gitrepo

    git = gitrepo.git_module()
    try:
        repo = git.Repo(settings.root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise gitrepo.GitError(f"--commit: {settings.root} is not inside a git repository") from e
    top = Path(repo.working_tree_dir)
    tracked = set(repo.git.ls_files().splitlines())
    rels = []
    for path in paths:
        rel = os.path.relpath(path.resolve() if path.exists() else path, top)
        rel = Path(rel).as_posix()
        if path.exists() or rel in tracked:
            rels.append(rel)
    if not rels:
        return None
    try:
        repo.git.add("--all", "--", *rels)
        if not repo.git.status("--porcelain", "--", *rels).strip():
            return None
        repo.git.commit("-m", message, "--only", "--", *rels)
    except git.GitCommandError as e:
        hint = ""
        if "tell me who you are" in str(e.stderr) or "identity" in str(e.stderr):
            hint = " (set git config user.name and user.email)"
        raise gitrepo.GitError(f"--commit: git commit failed: {gitrepo.last_line(e)}{hint}") from e
    return str(repo.head.commit.hexsha)


# -- the working tree's revision (local mode) ------------------------------------------------

_revision_cache: dict[Path, tuple[tuple[Any, ...], tuple[str | None, bool]]] = {}
_revision_lock = threading.Lock()


def revision(root: Path, *, digest: str | None = None) -> tuple[str | None, bool]:
    """``(commit sha, dirty)`` of the git checkout holding ``root``; ``(None, False)``
    outside git or before the first commit. Dirty counts only the layer files'
    directory tree (``root``), untracked files included.

    With ``digest`` (the loader digest of the layer files) the answer is cached per
    ``root`` and reused while the digest, the (mtime, size, inode) of ``.git/HEAD``, the
    current ref file and ``packed-refs``, and the checksum ending ``.git/index`` (its
    stat when the checksum is off: ``index.skipHash``) are unchanged, so a no-op
    reconcile runs no ``git status``. (A change to a file that is neither a layer file
    nor staged, e.g. a new untracked README, shows in ``dirty`` at the next change of
    one of those signals.) A broken ``.git`` gives ``(None, False)``, logged at debug.
    """
    gitdir = git_dir(root)
    if gitdir is None:
        return None, False
    key = (digest, *_signals(gitdir)) if digest else None
    if key is not None:
        with _revision_lock:
            cached = _revision_cache.get(root)
        if cached is not None and cached[0] == key:
            return cached[1]
    answer = _revision(root)
    if key is not None and (digest, *_signals(gitdir)) == key:
        # (unchanged while git ran; ``git status`` may rewrite the index with the same
        # content: its checksum, not its mtime, is in the key)
        with _revision_lock:
            _revision_cache[root] = (key, answer)
    return answer


def _revision(root: Path) -> tuple[str | None, bool]:
    from reconciler.config import gitrepo  # (outside git: never imported)

    try:
        git = gitrepo.git_module()
        repo = git.Repo(root, search_parent_directories=True)
        try:
            sha = str(repo.head.commit.hexsha)
        except ValueError:
            return None, False
        rel = os.path.relpath(root, repo.working_tree_dir or root)
        dirty = bool(repo.is_dirty(untracked_files=True, path=None if rel == "." else rel))
        return sha, dirty
    except Exception as e:  # a broken .git must not break planning; the plan then has no commit
        log.debug("%s: cannot read the git revision: %r", root, e)
        return None, False


def git_dir(root: Path) -> Path | None:
    """The git directory of the checkout holding ``root`` (``.git`` or what a ``.git``
    file names: worktrees, submodules), or None outside git."""
    for candidate in (root, *root.parents):
        dot = candidate / ".git"
        if dot.is_dir():
            return dot
        if dot.exists():
            try:
                text = dot.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return dot
            if text.startswith("gitdir:"):
                return (candidate / text[len("gitdir:"):].strip()).resolve()
            return dot
    return None


def common_dir(gitdir: Path) -> Path:
    """The common git directory of ``gitdir`` (refs, objects): itself, or what its
    ``commondir`` file names (a linked worktree)."""
    try:
        raw = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return gitdir
    return (gitdir / raw).resolve()


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _index_key(path: Path) -> Any:
    """The trailing checksum of a git index (SHA-1 or SHA-256 repositories: the last 32
    bytes cover both) with its size; the stat when the checksum is zero (skipHash)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - 32))
            tail = f.read()
    except OSError:
        return None
    if not tail[-20:].strip(b"\0"):
        return _stat(path)
    return size, tail


def _signals(gitdir: Path) -> tuple[Any, ...]:
    """Cheap stats that change whenever the commit or the index does."""
    common = common_dir(gitdir)
    ref: Path | None = None
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
        if head.startswith("ref:"):
            name = head[len("ref:"):].strip()
            ref = gitdir / name if (gitdir / name).exists() else common / name
    except OSError:
        head = ""
    return (str(gitdir), head, _stat(gitdir / "HEAD"),
            _stat(ref) if ref is not None else None,
            _stat(common / "packed-refs"), _index_key(gitdir / "index"))
