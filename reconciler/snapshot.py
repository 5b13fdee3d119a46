"""Read the world for one plan: layers, fleet, git revision, auto-pauses -> ``planning`` inputs.

This is the I/O half of planning (``planning.plan`` is the pure half): the CLI's
``plan``/``apply`` and the daemon's reconcile loop both call ``read`` and then
``planning.plan.make``. No printing, no click.

``read`` checks what ``monitors lint`` checks: every action's agent, routine and
channel names against monitors.toml (``action_check``; a monitor naming an
undefined one is invalid, like a file with a schema error), and that the layer
directories exist (``config.lint.layer_problems``). An invalid monitors.toml is
``Snapshot.settings_error``: ``plan`` and ``apply`` refuse it, as the daemon does.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors, fleet, settings
from reconciler.config import problems as problems_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning import desired as desired_mod
from reconciler.planning import placement

log = logging.getLogger("monitors.snapshot")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one plan is made from.

    Attributes:
        desired: the desired set of this device (last applied versions for invalid files).
        monitors: every valid resolved monitor (for list/view).
        digest: the loader digest of the layers.
        problems: every problem, formatted (errors of invalid files among them).
        errors: the error-severity ones among ``problems`` (same formatting).
        commit, dirty: the repository revision (None outside a git checkout).
        placements: name -> placement decision for every valid monitor.
        error_files: the files with at least one error-severity problem, sorted.
        settings_error: why monitors.toml is invalid, one line naming its first
            problem (``monitors.toml:3:1: daemon.resyncc: unknown field ...``), or None.
            Action names are not checked then.
        next_pause_expiry: the earliest pause ``until`` still in the future among the
            loaded overlays, as Unix seconds, or None (the daemon reconciles then).
    """

    desired: desired_mod.Desired
    monitors: Mapping[MonitorName, Monitor]
    digest: str
    problems: tuple[str, ...]
    errors: tuple[str, ...]
    commit: str | None
    dirty: bool
    placements: Mapping[MonitorName, placement.Placement]
    error_files: tuple[str, ...] = ()
    settings_error: str | None = None
    next_pause_expiry: float | None = None


_git_cache: dict[Path, tuple[tuple[Any, ...], tuple[str | None, bool]]] = {}
_git_cache_lock = threading.Lock()


def git_revision(root: Path, *, digest: str | None = None) -> tuple[str | None, bool]:
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
    gitdir = _git_dir(root)
    if gitdir is None:
        return None, False
    key = (digest, *_git_signals(gitdir)) if digest else None
    if key is not None:
        with _git_cache_lock:
            cached = _git_cache.get(root)
        if cached is not None and cached[0] == key:
            return cached[1]
    answer = _git_revision(root)
    if key is not None and (digest, *_git_signals(gitdir)) == key:
        # (unchanged while git ran; ``git status`` may rewrite the index with the same
        # content: its checksum, not its mtime, is in the key)
        with _git_cache_lock:
            _git_cache[root] = (key, answer)
    return answer


def _git_revision(root: Path) -> tuple[str | None, bool]:
    try:
        import git

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


def _git_dir(root: Path) -> Path | None:
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


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """``(mtime ns, size, inode)`` of ``path``: whether a file changed since it was last
    seen; None when it cannot be stat'ed (gone)."""
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
        return stat_key(path)
    return size, tail


def _git_signals(gitdir: Path) -> tuple[Any, ...]:
    """Cheap stats that change whenever the commit or the index does."""
    common = gitdir
    try:
        raw = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        common = (gitdir / raw).resolve()
    except OSError:
        pass
    ref: Path | None = None
    try:
        head = (gitdir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
        if head.startswith("ref:"):
            name = head[len("ref:"):].strip()
            ref = gitdir / name if (gitdir / name).exists() else common / name
    except OSError:
        head = ""
    return (str(gitdir), head, stat_key(gitdir / "HEAD"),
            stat_key(ref) if ref is not None else None,
            stat_key(common / "packed-refs"), _index_key(gitdir / "index"))


ActionCheck = Callable[[Mapping[str, Any]], list[tuple[str, str]]]
"""``config.monitorfile.ActionCheck``: ``(dotted field, message)`` pairs for one action mapping."""


def action_check(cfg: settings.Settings
                 ) -> tuple[ActionCheck | None, list[problems_mod.Problem]]:
    """The action check ``monitors lint``, ``plan`` and the daemon share: see
    ``actions.checks.bound`` (it lives there so that lint need not import the daemon)."""
    from reconciler.actions import checks

    return checks.bound(cfg)


def _load(cfg: settings.Settings, check: ActionCheck | None = None) -> Any:
    from reconciler.config import loader

    return loader.load(cfg, action_check=check)


def invalid_errors(result: Any) -> dict[MonitorName, str]:
    """name -> the first error line of each invalid monitor file of a ``LoadResult``."""
    out: dict[MonitorName, str] = {}
    for name, file in dict(getattr(result, "invalid", {}) or {}).items():
        wanted = os.path.abspath(file)  # not resolve(): a symlink loop raises there
        message = f"{file}: invalid"
        for problem in sorted(result.problems):
            if str(getattr(problem, "severity", "")) != "error":
                continue
            if os.path.abspath(problem.file) == wanted:
                message = problem.format()
                break
        out[MonitorName(name)] = message
    return out


def expired_pauses(result: Any, desired: Mapping[MonitorName, Monitor], root: Path
                   ) -> dict[MonitorName, str]:
    """name -> "pause expired ..." for desired monitors whose overlay pause has expired."""
    from reconciler.config import overlays

    now = dt.datetime.now(dt.UTC)
    out: dict[MonitorName, str] = {}
    for name, overlay in dict(getattr(result, "overlays", {}) or {}).items():
        pause = getattr(overlay, "pause", None)
        if name not in desired or pause is None:
            continue
        if overlays.is_expired(pause, now):
            try:
                where = str(Path(overlay.path).relative_to(root))
            except ValueError:
                where = str(overlay.path)
            out[MonitorName(name)] = f"pause expired at {pause.until} ({where})"
    return out


def next_pause_expiry(result: Any, now: float | None = None) -> float | None:
    """The earliest pause ``until`` after ``now`` (Unix seconds, default the current
    time) among the overlays of a ``LoadResult``, as Unix seconds; None when no
    loaded overlay has a pause expiring later. Unparseable ``until`` values are skipped."""
    from reconciler.config import overlays

    moment = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    soonest: float | None = None
    for overlay in dict(getattr(result, "overlays", {}) or {}).values():
        pause = getattr(overlay, "pause", None)
        if pause is None or not pause.until:
            continue
        try:
            at = overlays.parse_until(pause.until).timestamp()
        except ValueError:
            continue
        if at > moment and (soonest is None or at < soonest):
            soonest = at
    return soonest


def read(
    cfg: settings.Settings,
    *,
    last_good: Mapping[MonitorName, Monitor] | None = None,
    autopaused: Mapping[MonitorName, str] | None = None,
    completed: Mapping[MonitorName, tuple[str, str]] | None = None,
    with_git: bool = True,
    loader: Callable[[settings.Settings], Any] | None = None,
) -> Snapshot:
    """Load the layers and compute the desired set of ``cfg.device``.

    Args:
        last_good: the applied set (running registry) for last-known-good versions.
        autopaused: name -> reason, from running state.
        completed: name -> ``(key, reason)`` of completed monitors, from running state.
        loader: stands in for ``config.loader.load`` (then actions are not checked).

    A monitor whose action names an undefined agent, routine or channel is invalid
    (``unknown-reference``: kept at its last applied version, else not started); a
    missing layer directory is an error problem (``missing-layer``); an invalid
    monitors.toml is ``Snapshot.settings_error`` and a ``settings`` problem.

    Raises:
        errors.ConfigError: the fleet file or settings are unusable.
    """
    from reconciler.config import lint
    from reconciler.config import settings_check as _settings_check

    check, settings_problems = action_check(cfg)
    result = loader(cfg) if loader is not None else _load(cfg, check)
    fleet_doc = fleet.load(cfg.fleet_file)
    placements = {name: placement.owner_decision(m, device=cfg.device, fleet=fleet_doc)
                  for name, m in result.monitors.items()}

    def owner(m: Monitor) -> placement.Placement:
        return placements.get(m.name) or placement.owner_decision(m, device=cfg.device,
                                                                   fleet=fleet_doc)

    invalid = invalid_errors(result)
    desired = desired_mod.desired_set(result.monitors, owner=owner, invalid=invalid,
                                   last_good=last_good, autopaused=autopaused,
                                   completed=completed)
    desired.start_reasons.update(expired_pauses(result, desired.monitors, cfg.root))
    digest = str(getattr(result, "digest", ""))
    commit, dirty = git_revision(cfg.root, digest=digest) if with_git else (None, False)
    problems = sorted([*result.problems, *settings_problems, *lint.layer_problems(cfg)])
    return Snapshot(
        desired=desired,
        monitors=result.monitors,
        digest=digest,
        problems=tuple(p.format() for p in problems),
        errors=tuple(p.format() for p in problems if str(p.severity) == "error"),
        commit=commit,
        dirty=dirty,
        placements=placements,
        error_files=tuple(sorted({str(p.file) for p in problems
                                  if str(p.severity) == "error"})),
        settings_error=_settings_check.summary(settings_problems),
        next_pause_expiry=next_pause_expiry(result),
    )


__all__ = ["Snapshot", "action_check", "errors", "git_revision", "invalid_errors",
           "next_pause_expiry", "read"]
