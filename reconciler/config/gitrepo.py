"""Git, through GitPython: every git operation of monitors is here.

* The configuration repository's working tree (local mode): ``revision`` (the commit and
  whether the layers are dirty, cached on cheap stats), ``author`` and ``commit``
  (``pause --commit``), ``baseline`` (``system/`` against ``HEAD`` before the first pull).
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
import threading
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


def _open_bare(path: Path, what: str) -> Any:
    """The bare repository at ``path``, created empty (0700, in the private state
    directory) when absent.

    Raises:
        GitError: it cannot be created or opened.
    """
    git = _git()
    try:
        if (path / "HEAD").is_file():
            return git.Repo(path)
        atomic.make_dirs(path)  # in the private state directory: 0700, parents too
        return git.Repo.init(path, bare=True)
    except (git.GitError, OSError) as e:
        raise GitError(f"{path}: cannot open the {what}: {_last_line(e)}") from e


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
    try:
        git = _git()
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


# -- following a ref (git mode) --------------------------------------------------------------

MIRROR_DIR = "git-mirror.git"
MIRROR_REMOTE = "origin"


def open_repository(root: Path) -> Any:
    """The ``git.Repo`` of the repository holding ``root`` (a checkout or a bare one).

    Raises:
        GitError: ``root`` is in no git repository.
    """
    git = _git()
    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.GitError, OSError) as e:
        raise GitError(f"[git]: {root} is not inside a git repository ({_last_line(e)}); "
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
    git = _git()
    specs = [f"+refs/heads/*:refs/remotes/{MIRROR_REMOTE}/*", "+refs/tags/*:refs/tags/*"]
    if head is not None:
        specs.append(f"+HEAD:{head}")
    try:
        repo.git.fetch("--prune", "--no-write-fetch-head", url, *specs)
    except git.GitCommandError as e:
        missing = _missing_local_path(url)
        if missing is None:
            why = _last_line(e)
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
    git = _git()
    try:
        repo.git.fetch("--prune", "--no-write-fetch-head", remote)
    except git.GitCommandError as e:
        raise GitError(f"cannot fetch {remote}: {_last_line(e)}") from e


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
    git = _git()
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
    git = _git()
    try:
        tree = repo.commit(sha).tree
        root_id = str(tree.hexsha)
    except (git.BadName, git.BadObject, ValueError, git.GitCommandError) as e:
        raise GitError(f"{sha[:12]}: not a commit: {_last_line(e)}") from e
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
    git = _git()
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

