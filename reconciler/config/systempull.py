"""``system pull`` and ``system status``: ``system/`` as a mirror of an upstream folder.

The system layer (DESIGN.md §2) is a *mirror* of a folder of an upstream git
repository, never a merge:

* ``pull`` fetches the upstream (``[system] url``, ``ref``, ``path`` of
  ``monitors.toml``, default folder ``monitors/``) into the cache (``gitrepo.fetch``),
  then makes ``system/`` hold exactly the files of that folder at that commit
  (writing only files whose bytes differ, deleting the rest) and records what it
  wrote in ``system/.upstream.json`` (``systemrecord``).
* A local modification of ``system/`` (against the record) is refused unless forced.
* The first pull (no record yet): when the configuration repository is a git
  checkout, a file of ``system/`` counts as a local modification only if it is
  untracked or differs from its version in ``HEAD`` (``gitrepo.baseline``): a clone
  that ships built-ins committed without a record pulls cleanly, and git still has
  every file it replaces. Outside a git checkout nothing tells a shipped file
  from a local edit, so ``pull`` refuses to replace or delete any file that
  differs from the upstream's and names them (``--force`` overrides).
* ``status`` compares the record with the upstream's current tip.

Must not: call GitPython itself (``gitrepo`` does), use click or print: results are
returned as dataclasses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reconciler import errors, timestamps
from reconciler.config import gitrepo, systemrecord, writer
from reconciler.config.gitrepo import Baseline, GitError
from reconciler.config.systemrecord import Record, Upstream
from reconciler.settings import Settings


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
    up = systemrecord.upstream(settings, url=url, ref=ref)
    record = None if force else systemrecord.read_record(settings)
    repo = gitrepo.fetch(settings, up)
    commit = gitrepo.resolve(repo, up)
    tree_id, files = gitrepo.tree_files(commit, up)
    incoming = {rel: systemrecord.sha256_bytes(data) for rel, data in files.items()}
    local = systemrecord.local_manifest(settings)
    if not force:
        if record is not None:
            modified = systemrecord.diff(record.files, local)
        else:  # never pulled: only what git does not vouch for, and differs, is at risk
            base = gitrepo.baseline(settings)
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
        previous_record = systemrecord.read_record(settings)
    added = sorted(p for p in incoming if p not in local)
    changed = sorted(p for p in incoming if p in local and local[p] != incoming[p])
    removed = sorted(p for p in local if p not in incoming)
    for rel in added + changed:
        _write_bytes(settings.system_dir / rel, files[rel])
    for rel in removed:
        with contextlib.suppress(FileNotFoundError):
            (settings.system_dir / rel).unlink()
    _prune_empty_dirs(settings.system_dir)
    digest = systemrecord.manifest_digest(incoming)
    same = previous_record is not None and (
        previous_record.url, previous_record.ref, previous_record.path, previous_record.commit,
        previous_record.digest) == (up.url, up.ref, up.path, str(commit.hexsha), digest)
    if not same:  # an unchanged pull leaves the record (and git status) alone
        systemrecord.write_record(settings, Record(
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
    record = systemrecord.read_record(settings)
    modifications = systemrecord.system_modifications(settings)
    base = None
    if record is None:
        base = gitrepo.baseline(settings)
        if base.checkout:  # what the first pull would refuse (before comparing bytes)
            modifications = [settings.system_dir / p for p in base.modified]
    try:
        up: Upstream | None = systemrecord.upstream(settings)
    except errors.ConfigError:
        up = None
    if up is None or not fetch_upstream:
        return Status(up, record, None, None, None, modifications,
                      None if up else "no upstream configured", base)
    try:
        repo = gitrepo.fetch(settings, up)
        tip = gitrepo.resolve(repo, up)
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
