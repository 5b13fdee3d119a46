"""Git, through GitPython: every git operation of monitors is here.

* The configuration repository before the first pull: ``baseline`` (``system/``
  against ``HEAD``). Its working tree (the revision, ``--commit``) is ``gitworktree``'s,
  on this module's ``git_module``, ``last_line`` and ``GitError``.
* Following a ref (git mode, ``config.gitfollow``): ``open_repository`` /
  ``open_mirror``, ``fetch_remote`` / ``fetch_url``, ``resolve_ref``, ``read_blobs``
  (files of a commit's tree, read from the object database: the working tree and the
  index are never read or written) and ``verify_commit``.
* The system layer's upstream (``system pull``), on the same primitives: ``fetch``
  (``fetch_url`` into a bare cache at ``<state>/system-upstream.git``; forced, pruned
  refspecs, so a force-pushed or rewritten upstream is simply followed), ``resolve``
  (``resolve_ref`` over branch, tag, commit) and ``tree_files`` (``_files``).

Why GitPython and not our own ``subprocess`` calls: it resolves refs in Python (loose
refs and ``packed-refs``, no process), so checking an unchanged ref costs no fork, and
it reads objects through one long-lived ``git cat-file --batch`` process, so a tree of
many blobs costs one process; ``fetch`` and ``verify-commit``, which have no library
equivalent, go through its ``repo.git`` wrapper of the git command.

Every git failure is one ``GitError`` line (git's own ``fatal:`` line). Must not:
change ``system/`` or its record (``systempull``); no click, no printing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import atomic, errors
from reconciler.config import systemrecord
from reconciler.config.systemrecord import Upstream
from reconciler.settings import Settings

log = logging.getLogger("monitors.git")

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


def git_module() -> Any:
    """GitPython's ``git`` module (imported on first use; raises GitError if missing)."""
    try:
        import git
    except ImportError as e:  # pragma: no cover - the dependency is declared
        raise GitError(f"GitPython cannot be used: {e}") from e
    return git


def last_line(e: Exception) -> str:
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
    git = git_module()
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


def _open_bare(path: Path, what: str) -> Any:
    """The bare repository at ``path``, created empty (0700, in the private state
    directory) when absent.

    Raises:
        GitError: it cannot be created or opened.
    """
    git = git_module()
    try:
        if (path / "HEAD").is_file():
            return git.Repo(path)
        atomic.make_dirs(path)  # in the private state directory: 0700, parents too
        return git.Repo.init(path, bare=True)
    except (git.GitError, OSError) as e:
        raise GitError(f"{path}: cannot open the {what}: {last_line(e)}") from e


def fetch(settings: Settings, up: Upstream) -> Any:
    """Fetch ``up`` into the cache (forced, pruned; ``fetch_url``) and return the cache
    ``git.Repo``.

    Raises:
        GitError: the upstream cannot be fetched (one line from git's stderr).
    """
    repo = _open_bare(cache_path(settings), "system-layer cache")
    try:
        fetch_url(repo, up.url, head=HEAD_REF if up.ref is None else None)
    except GitError as e:
        raise GitError(f"system pull: {e}") from e
    return repo


def resolve(repo: Any, up: Upstream) -> Any:
    """The commit ``up.ref`` names in the fetched cache (branch, tag, then commit id).

    Raises:
        GitError: no such branch, tag or commit upstream.
    """
    if up.ref is None:
        candidates = [HEAD_REF]
    else:
        ref = up.ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
        candidates = [f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref]
    for name in candidates:
        try:
            return repo.commit(resolve_ref(repo, name))
        except GitError:
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
    prefix = tree.path + "/" if tree.path else ""
    files = {path[len(prefix):]: data for path, data in _files(tree).items()}
    files.pop(systemrecord.RECORD_FILE, None)
    return str(tree.hexsha), files


def _files(tree: Any) -> dict[str, bytes]:
    """Every regular file below ``tree`` (100644 / 100755; symlinks and submodules
    skipped): its path from the repository's top -> bytes (one ``cat-file --batch``)."""
    out: dict[str, bytes] = {}
    items = tree.traverse() if tree.type == "tree" else [tree]
    for item in items:
        if item.type == "blob" and item.mode & 0o170000 == 0o100000:
            out[str(item.path)] = item.data_stream.read()
    return out


# -- following a ref (git mode) --------------------------------------------------------------

MIRROR_DIR = "git-mirror.git"
MIRROR_REMOTE = "origin"


def open_repository(root: Path) -> Any:
    """The ``git.Repo`` of the repository holding ``root`` (a checkout or a bare one).

    Raises:
        GitError: ``root`` is in no git repository.
    """
    git = git_module()
    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.GitError, OSError) as e:
        raise GitError(f"[git]: {root} is not inside a git repository ({last_line(e)}); "
                       "set [git] url to follow a remote repository") from e


def open_mirror(state_dir: Path) -> Any:
    """The daemon's own bare mirror ``<state>/git-mirror.git`` (created empty when absent).

    Raises:
        GitError: it cannot be created or opened.
    """
    return _open_bare(state_dir / MIRROR_DIR, "git mirror")


def fetch_url(repo: Any, url: str, *, head: str | None = None) -> None:
    """Fetch every branch (as ``refs/remotes/origin/*``) and tag of ``url`` into the
    bare ``repo``, forced and pruned, so a force-push or a deleted branch upstream is
    followed; ``head``: also store the remote's ``HEAD`` as that ref.

    Raises:
        GitError: the fetch failed (``cannot fetch URL: why``).
    """
    git = git_module()
    specs = [f"+refs/heads/*:refs/remotes/{MIRROR_REMOTE}/*", "+refs/tags/*:refs/tags/*"]
    if head is not None:
        specs.append(f"+HEAD:{head}")
    try:
        repo.git.fetch("--prune", "--no-write-fetch-head", url, *specs)
    except git.GitCommandError as e:
        missing = _missing_local_path(url)
        if missing is None:
            why = last_line(e)
        else:
            why = ("no such file or directory" if missing == url
                   else f"{missing}: no such file or directory")
        raise GitError(f"cannot fetch {url}: {why}") from e


def fetch_remote(repo: Any, remote: str) -> None:
    """``git fetch --prune <remote>`` with the remote's configured (forced) refspecs;
    only refs change, never the working tree or the index.

    Raises:
        GitError: the fetch failed (one line).
    """
    git = git_module()
    try:
        repo.git.fetch("--prune", "--no-write-fetch-head", remote)
    except git.GitCommandError as e:
        raise GitError(f"cannot fetch {remote}: {last_line(e)}") from e


def remote_of(repo: Any, ref: str) -> str | None:
    """The remote a remote-tracking ``ref`` (``origin/main``, ``refs/remotes/origin/main``)
    belongs to, or None for a local branch, tag, ``HEAD`` or commit."""
    name = ref.removeprefix("refs/remotes/")
    head, _, rest = name.partition("/")
    if not rest:
        return None
    try:
        names = {str(r.name) for r in repo.remotes}
    except Exception:
        return None
    return head if head in names else None


def resolve_ref(repo: Any, ref: str) -> str:
    """The commit id ``ref`` names (a branch, remote-tracking branch, tag, ``HEAD`` or a
    commit id), read from the refs without running git.

    Raises:
        GitError: no such ref (deleted, or never existed).
    """
    git = git_module()
    try:
        return str(repo.commit(f"{ref}^{{commit}}").hexsha)
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError, IndexError) as e:
        raise GitError(f"ref {ref!r} names no commit ({type(e).__name__})") from e


def read_blobs(repo: Any, sha: str, paths: Iterable[str]) -> tuple[str, dict[str, bytes]]:
    """The root tree id of commit ``sha`` and the regular files under ``paths`` (POSIX,
    relative to the repository's top; a folder gives its whole subtree, a missing path
    nothing), read from the object database.

    Raises:
        GitError: ``sha`` is not a commit of ``repo``.
    """
    git = git_module()
    try:
        tree = repo.commit(sha).tree
        root_id = str(tree.hexsha)
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError) as e:
        raise GitError(f"{sha[:12]}: not a commit: {last_line(e)}") from e
    out: dict[str, bytes] = {}
    for want in sorted({p.strip("/") for p in paths}):
        try:
            out.update(_files(tree / want if want not in ("", ".") else tree))
        except KeyError:
            continue
    return root_id, out


def verify_commit(repo: Any, sha: str, *, allowed_signers: Path | None = None,
                  gpg_home: Path | None = None) -> str | None:
    """Why ``git verify-commit`` refuses ``sha`` (one line), or None when it accepts it.

    Args:
        allowed_signers: an ssh ``allowedSignersFile`` (``gpg.ssh.allowedSignersFile``).
        gpg_home: a gpg keyring directory (``GNUPGHOME``).
    """
    git = git_module()
    options = []
    if allowed_signers is not None:
        options = ["-c", f"gpg.ssh.allowedSignersFile={allowed_signers}"]
    env = {"GNUPGHOME": str(gpg_home)} if gpg_home is not None else {}
    try:
        git.Git(repo.git_dir).execute(
            ["git", *options, "verify-commit", sha], env={**os.environ, **env})
    except git.GitCommandError as e:
        text = str(e.stderr or "").strip().strip("'")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return lines[-1] if lines else "not signed"
    return None


def tracked_paths(repo: Any, root: Path) -> str:
    """``root`` relative to the top of ``repo``'s working tree (POSIX, ``""`` at the top;
    ``""`` for a bare repository)."""
    top = repo.working_tree_dir
    if top is None:
        return ""
    rel = Path(os.path.relpath(root.resolve(), Path(str(top)).resolve())).as_posix()
    return "" if rel == "." else rel

