"""Git, through GitPython: the pull-only system layer, the pause author, ``--commit``.

The system layer (DESIGN.md §2) is a *mirror* of a folder of an upstream git
repository, never a merge:

* ``pull`` fetches the upstream (``[system] url``, ``ref``, ``path`` of
  ``monitors.toml``, default folder ``monitors/``) into a bare cache at
  ``<state>/system-upstream.git`` with forced refspecs (``+refs/heads/*``,
  ``+refs/tags/*``, pruned), so a force-pushed or rewritten upstream is simply
  followed. It then makes ``system/`` hold exactly the files of that folder at
  that commit (writing only files whose bytes differ, deleting the rest) and
  records what it wrote in ``system/.upstream.json``.
* The record (``RECORD_FILE``, JSON, ``version: 1``) holds the upstream URL, ref,
  folder, commit, the folder's git tree id, a sha256 ``digest`` over the file
  list, and a sha256 per file. It lives inside ``system/`` on purpose: it travels
  with the layer it describes (commit it with the layer) and it is the one file
  there that is not a monitor; the loader skips dot-files and non-YAML files.
* ``system_modifications`` compares ``system/`` with the record: a changed,
  added or deleted file is a local modification (lint reports them as errors;
  ``pull`` refuses them unless forced). Without a record (never pulled) lint
  reports nothing, since nothing records what the files should be.
* The first pull (no record yet): when the configuration repository is a git
  checkout, a file of ``system/`` counts as a local modification only if it is
  untracked or differs from its version in ``HEAD`` (``baseline``): a clone that
  ships built-ins committed without a record pulls cleanly, and git still has
  every file it replaces. Outside a git checkout nothing tells a shipped file
  from a local edit, so ``pull`` refuses to replace or delete any file that
  differs from the upstream's and names them (``--force`` overrides).

No click and no printing: results are returned as dataclasses.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import atomic, errors, timestamps
from reconciler.config import writer
from reconciler.settings import Settings

RECORD_FILE = ".upstream.json"
RECORD_VERSION = 1
CACHE_DIR = "system-upstream.git"
DEFAULT_PATH = "monitors/"
HEAD_REF = "refs/upstream/HEAD"


class GitError(errors.MonitorsError):
    """A git operation failed (unreachable upstream, unknown ref, no identity, ...)."""


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where built-ins come from.

    Attributes:
        url: any URL or path git can fetch (``https://``, ``file://``, a path).
        ref: a branch, tag or commit id; None for the upstream's default branch.
        path: the folder inside the upstream holding the monitors (``""`` = root).
    """

    url: str
    ref: str | None
    path: str


@dataclass(frozen=True, slots=True)
class Record:
    """What the last ``system pull`` wrote (``system/.upstream.json``).

    Attributes:
        files: path relative to ``system/`` (POSIX) -> ``sha256:<hex>`` of its bytes.
        digest: ``sha256:<hex>`` over the sorted ``"<sha> <path>\\n"`` lines of ``files``.
        pulled_at: aware ISO-8601 UTC time of the pull.
    """

    url: str
    ref: str | None
    path: str
    commit: str
    tree: str
    digest: str
    files: dict[str, str]
    pulled_at: str


@dataclass(frozen=True, slots=True)
class PullResult:
    """Outcome of ``pull``: the commit now in ``system/`` and what changed there.

    ``added``/``changed``/``removed`` are paths relative to ``system/``.
    """

    upstream: Upstream
    commit: str
    previous: str | None
    tree: str
    digest: str
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        """True when ``system/`` already held exactly this content."""
        return not (self.added or self.changed or self.removed)


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


@dataclass(frozen=True, slots=True)
class Status:
    """``system status``: the recorded pull against the upstream's current tip.

    Attributes:
        upstream: the configured (or last pulled) upstream, None when neither exists.
        record: the last pull, None when ``system/`` was never pulled.
        tip: the upstream ref's current commit, None when not fetched or unknown.
        behind: upstream commits not in the recorded one (None: unknown).
        ahead: recorded commits no longer in the upstream, e.g. after a force push.
        modifications: local modifications of ``system/`` (absolute paths).
        fetch_error: why the upstream could not be consulted, when it could not.
        baseline: ``system/`` against git's ``HEAD`` when never pulled (else None).
    """

    upstream: Upstream | None
    record: Record | None
    tip: str | None
    behind: int | None
    ahead: int | None
    modifications: list[Path]
    fetch_error: str | None = None
    baseline: Baseline | None = None


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


def sha256_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_digest(files: dict[str, str]) -> str:
    """The tree digest: sha256 over sorted ``"<sha> <path>\\n"`` lines."""
    body = "".join(f"{files[p]} {p}\n" for p in sorted(files))
    return sha256_bytes(body.encode())


# -- upstream configuration and record ---------------------------------------------------


def record_path(settings: Settings) -> Path:
    """``system/.upstream.json``."""
    return settings.system_dir / RECORD_FILE


def read_record(settings: Settings) -> Record | None:
    """The last pull's record, or None when there is none.

    Raises:
        errors.ConfigError: the record exists but is unreadable or malformed
            (the message says to run ``monitors system pull --force``).
    """
    path = record_path(settings)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict) or raw.get("version") != RECORD_VERSION:
            raise ValueError(f"unknown record version {raw.get('version')!r}")
        return Record(
            url=str(raw["url"]), ref=raw.get("ref"), path=str(raw.get("path", "")),
            commit=str(raw["commit"]), tree=str(raw.get("tree", "")),
            digest=str(raw["digest"]), files={str(k): str(v) for k, v in raw["files"].items()},
            pulled_at=str(raw.get("pulledAt", "")),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise errors.ConfigError(
            f"{path}: unreadable system-layer record ({e}); run `monitors system pull "
            "--force` to restore system/ from its upstream"
        ) from e


def _write_record(settings: Settings, record: Record) -> None:
    body = {
        "version": RECORD_VERSION,
        "comment": "written by `monitors system pull`; do not edit",
        "url": record.url, "ref": record.ref, "path": record.path, "commit": record.commit,
        "tree": record.tree, "digest": record.digest, "pulledAt": record.pulled_at,
        "files": dict(sorted(record.files.items())),
    }
    writer.atomic_write(record_path(settings), json.dumps(body, indent=2) + "\n")


def upstream(settings: Settings, *, url: str | None = None, ref: str | None = None) -> Upstream:
    """The upstream to pull: ``--from``/``--ref`` over ``[system]`` of ``monitors.toml``,
    else the last pulled upstream.

    Raises:
        errors.ConfigError: no URL anywhere (the message says where to set one).
    """
    section = settings.section("system")
    record = None
    with contextlib.suppress(errors.ConfigError):
        record = read_record(settings)
    chosen_url = url or section.get("url") or (record.url if record else None)
    if not chosen_url:
        raise errors.ConfigError(
            "system pull: no upstream; set [system] url in monitors.toml or pass --from URL"
        )
    if ref is None:
        ref = section.get("ref") or (record.ref if record and not url else None)
    path = str(section.get("path", DEFAULT_PATH)).strip().strip("/")
    if path == ".":
        path = ""
    return Upstream(url=str(chosen_url), ref=str(ref) if ref else None, path=path)


# -- local state of system/ ---------------------------------------------------------------


def _local_files(system_dir: Path) -> Iterator[str]:
    if not system_dir.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(system_dir):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(system_dir).as_posix()
            if rel == RECORD_FILE or full.is_symlink() or not full.is_file():
                continue
            yield rel


def local_manifest(settings: Settings) -> dict[str, str]:
    """Every file under ``system/`` (record excluded) -> ``sha256:<hex>``."""
    return {rel: sha256_bytes((settings.system_dir / rel).read_bytes())
            for rel in _local_files(settings.system_dir)}


def _diff(expected: dict[str, str], actual: dict[str, str]) -> list[str]:
    return sorted(
        [p for p, h in actual.items() if expected.get(p) != h]
        + [p for p in expected if p not in actual]
    )


def system_modifications(settings: Settings) -> list[Path]:
    """Files of ``system/`` that differ from the recorded pulled tree.

    A changed or added file, and a recorded file that was deleted, are each
    one entry (absolute path, sorted). Empty when ``system/`` was never pulled.

    Raises:
        errors.ConfigError: the record is malformed.
    """
    record = read_record(settings)
    if record is None:
        return []
    return [settings.system_dir / p for p in _diff(record.files, local_manifest(settings))]


def baseline(settings: Settings) -> Baseline:
    """Compare ``system/`` with what the configuration repository committed (``HEAD``).

    Used before the first pull, when there is no record: a file whose bytes equal
    its blob in ``HEAD`` is *committed*; an untracked file (ignored ones included)
    or one that differs from ``HEAD`` (staged or not) is *modified*. When the root
    is not in a git work tree (or git cannot read it), ``checkout`` is False and
    every file is listed as modified. Never raises.
    """
    local = list(_local_files(settings.system_dir))
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


def modification_problems(settings: Settings, *, cwd: Path | None = None) -> list[Any]:
    """``system_modifications`` as lint errors (rule ``system-modified``), one per file,
    ``file:1:1: error: ...``; a malformed record is one error on the record itself.

    Returns:
        ``problems.Problem`` values (file shown relative to ``cwd`` when below it).
    """
    from reconciler.config import problems as P

    base = (cwd or Path.cwd()).resolve()

    def display(path: Path) -> str:
        try:
            return str(path.resolve().relative_to(base))
        except ValueError:
            return str(path)

    try:
        modified = system_modifications(settings)
    except errors.ConfigError as e:
        return [P.error(display(record_path(settings)), 1, 1, "", str(e).split(": ", 1)[-1],
                        "system-modified")]
    out = []
    for path in modified:
        what = "changed or added" if path.exists() else "deleted"
        out.append(P.error(display(path), 1, 1, "",
                           f"{what} in the pull-only system layer since the last `monitors "
                           "system pull`: move the change to monitors.d/ (a user copy shadows "
                           "a built-in) or an overlay (monitors pause/pin); `monitors system "
                           "pull --force` restores the upstream version", "system-modified"))
    return out


# -- the cache and the pull ---------------------------------------------------------------


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


def _tree_files(commit: Any, up: Upstream) -> tuple[str, dict[str, bytes]]:
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
        if rel == RECORD_FILE:
            continue
        files[rel] = item.data_stream.read()
    return str(tree.hexsha), files


def _relative(settings: Settings, rels: Iterable[str]) -> str:
    base = settings.system_dir
    shown = []
    for rel in rels:
        path = base / rel
        try:
            shown.append(str(path.relative_to(settings.root)))
        except ValueError:
            shown.append(str(path))
    return ", ".join(shown)


def pull(
    settings: Settings, *, url: str | None = None, ref: str | None = None, force: bool = False
) -> PullResult:
    """Make ``system/`` a mirror of the upstream folder at ``ref`` and record it.

    Args:
        url, ref: ``--from`` and ``--ref``; default ``[system]`` of ``monitors.toml``.
        force: overwrite local modifications of ``system/``.

    Raises:
        errors.ConfigError: no upstream configured, or a malformed record.
        GitError: fetch failed, unknown ref, missing folder, or ``system/`` was
            modified locally (naming the files) and ``force`` is False.
    """
    up = upstream(settings, url=url, ref=ref)
    record = None if force else read_record(settings)
    repo = fetch(settings, up)
    commit = resolve(repo, up)
    tree_id, files = _tree_files(commit, up)
    incoming = {rel: sha256_bytes(data) for rel, data in files.items()}
    local = local_manifest(settings)
    if not force:
        if record is not None:
            modified = _diff(record.files, local)
        else:  # never pulled: only what git does not vouch for, and differs, is at risk
            base = baseline(settings)
            modified = [p for p in base.modified if incoming.get(p) != local.get(p)]
            if modified and not base.checkout:
                raise GitError(
                    f"system/ was never pulled and {settings.root} is not a git checkout, so "
                    f"nothing shows these files are unmodified: {_relative(settings, modified)}; "
                    "move your own monitors to monitors.d/, or pass --force to replace "
                    "system/ with the upstream's"
                )
        if modified:
            raise GitError(
                f"system/ was modified locally: {_relative(settings, modified)}; system/ is "
                "pull-only: move the change to monitors.d/ (a user copy shadows a built-in) "
                "or an overlay (monitors pause/pin), or pass --force to discard it"
            )
    previous_record = None
    with contextlib.suppress(errors.ConfigError):
        previous_record = read_record(settings)
    added = sorted(p for p in incoming if p not in local)
    changed = sorted(p for p in incoming if p in local and local[p] != incoming[p])
    removed = sorted(p for p in local if p not in incoming)
    for rel in added + changed:
        _write_bytes(settings.system_dir / rel, files[rel])
    for rel in removed:
        with contextlib.suppress(FileNotFoundError):
            (settings.system_dir / rel).unlink()
    _prune_empty_dirs(settings.system_dir)
    digest = manifest_digest(incoming)
    same = previous_record is not None and (
        previous_record.url, previous_record.ref, previous_record.path, previous_record.commit,
        previous_record.digest) == (up.url, up.ref, up.path, str(commit.hexsha), digest)
    if not same:  # an unchanged pull leaves the record (and git status) alone
        _write_record(settings, Record(
            url=up.url, ref=up.ref, path=up.path, commit=str(commit.hexsha), tree=tree_id,
            digest=digest, files=incoming,
            pulled_at=timestamps.utc_seconds(),
        ))
    return PullResult(
        upstream=up, commit=str(commit.hexsha),
        previous=previous_record.commit if previous_record else None,
        tree=tree_id, digest=digest, added=added, changed=changed, removed=removed,
    )


def _write_bytes(path: Path, data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\r" not in text:
        writer.atomic_write(path, text)
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as e:
        raise errors.ConfigError(f"{path}: cannot write: {e.strerror}") from e


def _prune_empty_dirs(root: Path) -> None:
    if not root.is_dir():
        return
    for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda t: -len(t[0])):
        path = Path(dirpath)
        if path != root and path.name != ".git" and not any(path.iterdir()):
            shutil.rmtree(path, ignore_errors=True)


def status(settings: Settings, *, fetch_upstream: bool = True) -> Status:
    """The recorded pull, the upstream tip, behind/ahead counts and local modifications.

    Never raises for an unreachable upstream: ``fetch_error`` says why instead.

    Raises:
        errors.ConfigError: the record is malformed.
    """
    record = read_record(settings)
    modifications = system_modifications(settings)
    base = None
    if record is None:
        base = baseline(settings)
        if base.checkout:  # what the first pull would refuse (before comparing bytes)
            modifications = [settings.system_dir / p for p in base.modified]
    try:
        up: Upstream | None = upstream(settings)
    except errors.ConfigError:
        up = None
    if up is None or not fetch_upstream:
        return Status(up, record, None, None, None, modifications,
                      None if up else "no upstream configured", base)
    try:
        repo = fetch(settings, up)
        tip = resolve(repo, up)
    except GitError as e:
        return Status(up, record, None, None, None, modifications, str(e), base)
    behind = ahead = None
    if record is not None:
        try:
            counts = repo.git.rev_list("--left-right", "--count", f"{tip.hexsha}...{record.commit}")
            left, right = counts.split()
            behind, ahead = int(left), int(right)
        except Exception:  # the recorded commit is unknown to the cache
            behind = ahead = None
    return Status(up, record, str(tip.hexsha), behind, ahead, modifications, None, base)


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
