"""Git, through GitPython: the upstream cache, the configuration repository's ``HEAD``,
the pause author and ``--commit``.

* ``fetch`` fetches the upstream (``systemrecord.Upstream``) into a bare cache at
  ``<state>/system-upstream.git`` with forced refspecs (``+refs/heads/*``,
  ``+refs/tags/*``, pruned), so a force-pushed or rewritten upstream is simply
  followed; ``resolve`` finds the commit a ref names there and ``tree_files`` the
  files of the upstream folder at that commit.
* ``baseline`` compares ``system/`` with the configuration repository's ``HEAD`` (used
  before the first pull, when no record says what the files should be).
* ``author`` and ``commit`` serve the overlay commands (``pause --commit``).

Every git failure is one ``GitError`` line (git's own ``fatal:`` line). Must not:
change ``system/`` or its record (``systempull``); no click, no printing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import atomic, errors
from reconciler.config import systemrecord
from reconciler.config.systemrecord import Upstream
from reconciler.settings import Settings

CACHE_DIR = "system-upstream.git"
HEAD_REF = "refs/upstream/HEAD"


class GitError(errors.MonitorsError):
    """A git operation failed (unreachable upstream, unknown ref, no identity, ...)."""


@dataclass(frozen=True, slots=True)
class Baseline:
    """``system/`` against the configuration repository's ``HEAD`` before the first pull.

    Attributes:
        checkout: True when the root is inside a git work tree (and ``system/`` in it).
        committed: files of ``system/`` (relative, POSIX) identical to their ``HEAD``
            version: the mirror may replace or delete them, git keeps them.
        modified: files that are untracked or differ from ``HEAD`` (local
            modifications); every file when ``checkout`` is False.
    """

    checkout: bool
    committed: list[str]
    modified: list[str]


def _git() -> Any:
    try:
        import git
    except ImportError as e:  # pragma: no cover - the dependency is declared
        raise GitError(f"GitPython cannot be used: {e}") from e
    return git


def _last_line(e: Exception) -> str:
    """The one meaningful line of a git failure: git's first ``fatal:`` (else
    ``error:``) line without its prefix, else the last line of its stderr.

    GitPython wraps stderr as ``\n  stderr: '...'``; git follows its ``fatal:``
    line with advice ("Please make sure you have the correct access rights / and
    the repository exists."), whose last line alone means nothing.
    """
    text = str(getattr(e, "stderr", "") or e).strip()
    text = text.removeprefix("stderr:").strip()
    if text.startswith("'") and text.endswith("'"):
        text = text[1:-1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for prefix in ("fatal:", "error:"):
        for ln in lines:
            if ln.startswith(prefix):
                return ln.removeprefix(prefix).strip()
    return lines[-1].strip("'").strip() if lines else type(e).__name__


def _missing_local_path(url: str) -> str | None:
    """The local path ``url`` names (a path or ``file://`` URL) when it does not exist."""
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(url).path)
    elif "://" in url or (":" in url.split("/", 1)[0] and not url.startswith("/")):
        return None  # a remote URL or scp-like host:path
    else:
        path = url
    return None if os.path.lexists(os.path.expanduser(path)) else path


# -- the configuration repository before the first pull -------------------------------------


def baseline(settings: Settings) -> Baseline:
    """Compare ``system/`` with what the configuration repository committed (``HEAD``).

    Used before the first pull, when there is no record: a file whose bytes equal
    its blob in ``HEAD`` is *committed*; an untracked file (ignored ones included)
    or one that differs from ``HEAD`` (staged or not) is *modified*. When the root
    is not in a git work tree (or git cannot read it), ``checkout`` is False and
    every file is listed as modified. Never raises.
    """
    local = list(systemrecord.local_files(settings.system_dir))
    git = _git()
    try:
        repo = git.Repo(settings.root, search_parent_directories=True)
        top = Path(str(repo.working_tree_dir)).resolve()
        prefix = settings.system_dir.resolve().relative_to(top).as_posix()
        try:
            tree = repo.head.commit.tree
        except ValueError:  # no commit yet: nothing is committed
            tree = None
        committed: list[str] = []
        modified: list[str] = []
        for rel in local:
            inside = rel if prefix in ("", ".") else f"{prefix}/{rel}"
            try:
                blob = tree / inside if tree is not None else None
            except KeyError:
                blob = None
            same = (blob is not None and blob.type == "blob"
                    and blob.data_stream.read() == (settings.system_dir / rel).read_bytes())
            (committed if same else modified).append(rel)
        return Baseline(True, committed, modified)
    except (git.GitError, OSError, ValueError, TypeError):
        # not a checkout (InvalidGitRepositoryError, NoSuchPathError), bare, system/
        # outside the work tree, or git unusable: nothing vouches for any file
        return Baseline(False, [], local)


# -- the upstream cache ----------------------------------------------------------------------


def cache_path(settings: Settings) -> Path:
    """The bare clone the upstream is fetched into: ``<state>/system-upstream.git``."""
    return settings.state_dir / CACHE_DIR


def _open_cache(settings: Settings) -> Any:
    git = _git()
    path = cache_path(settings)
    try:
        if (path / "HEAD").is_file():
            return git.Repo(path)
        atomic.make_dirs(path)  # in the private state directory: 0700, parents too
        return git.Repo.init(path, bare=True)
    except (git.GitError, OSError) as e:
        raise GitError(f"{path}: cannot open the system-layer cache: {_last_line(e)}") from e


def fetch(settings: Settings, up: Upstream) -> Any:
    """Fetch ``up`` into the cache (forced, pruned) and return the cache ``git.Repo``.

    Raises:
        GitError: the upstream cannot be fetched (one line from git's stderr).
    """
    git = _git()
    repo = _open_cache(settings)
    specs = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"]
    if up.ref is None:
        specs.append(f"+HEAD:{HEAD_REF}")
    try:
        repo.git.fetch("--prune", "--no-write-fetch-head", up.url, *specs)
    except git.GitCommandError as e:
        missing = _missing_local_path(up.url)
        if missing is None:
            why = _last_line(e)
        else:
            why = ("no such file or directory" if missing == up.url
                   else f"{missing}: no such file or directory")
        raise GitError(f"system pull: cannot fetch {up.url}: {why}") from e
    return repo


def resolve(repo: Any, up: Upstream) -> Any:
    """The commit ``up.ref`` names in the fetched cache (branch, tag, then commit id).

    Raises:
        GitError: no such branch, tag or commit upstream.
    """
    git = _git()
    if up.ref is None:
        candidates = [HEAD_REF]
    else:
        ref = up.ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
        candidates = [f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref]
    for name in candidates:
        try:
            return repo.commit(f"{name}^{{commit}}")
        except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
            continue
    raise GitError(
        f"system pull: {up.url} has no branch, tag or commit {up.ref or 'HEAD'!r}"
    )


def tree_files(commit: Any, up: Upstream) -> tuple[str, dict[str, bytes]]:
    """The tree id of ``up.path`` at ``commit`` and its regular files (relative path ->
    bytes; symlinks, submodules and the record left out).

    Raises:
        GitError: the upstream has no such folder, or it is not a folder.
    """
    tree = commit.tree
    if up.path:
        try:
            tree = tree / up.path
        except KeyError:
            raise GitError(
                f"system pull: {up.url} at {commit.hexsha[:12]} has no folder {up.path}/ "
                "(set [system] path in monitors.toml)"
            ) from None
        if tree.type != "tree":
            raise GitError(f"system pull: {up.url}: {up.path} is not a folder")
    files: dict[str, bytes] = {}
    prefix = tree.path + "/" if tree.path else ""
    for item in tree.traverse():
        # regular files only (100644 / 100755); symlinks and submodules are skipped
        if item.type != "blob" or item.mode & 0o170000 != 0o100000:
            continue
        rel = item.path[len(prefix):]
        if rel == systemrecord.RECORD_FILE:
            continue
        files[rel] = item.data_stream.read()
    return str(tree.hexsha), files


# -- the configuration repository: author and --commit --------------------------------------


def author(settings: Settings) -> str:
    """``Name <email>`` from git config (repository, then global); ``""`` when unset
    or when git is unavailable."""
    git = _git()
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
    git = _git()
    try:
        repo = git.Repo(settings.root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as e:
        raise GitError(f"--commit: {settings.root} is not inside a git repository") from e
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
        raise GitError(f"--commit: git commit failed: {_last_line(e)}{hint}") from e
    return str(repo.head.commit.hexsha)
