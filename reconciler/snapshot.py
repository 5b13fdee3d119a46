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


def git_revision(root: Path, *, digest: str | None = None) -> tuple[str | None, bool]:
    """``(commit sha, dirty)`` of the checkout holding ``root``: ``config.gitworktree.revision``
    (cached per ``digest``; see there)."""
    from reconciler.config import gitworktree

    return gitworktree.revision(root, digest=digest)


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """``(mtime ns, size, inode)`` of ``path``: whether a file changed since it was last
    seen; None when it cannot be stat'ed (gone)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


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

    return loader.load(cfg, action_check=check, cache=cfg.state_dir)  # lint's cache too


def invalid_errors(result: Any) -> dict[MonitorName, str]:
    """name -> the first error line of each invalid monitor file of a ``LoadResult``
    (``<file>: invalid`` when it has none). One pass over the problems, whatever the
    number of invalid files."""
    invalid = dict(getattr(result, "invalid", {}) or {})
    if not invalid:
        return {}
    first: dict[str, str] = {}  # absolute path -> its first error, formatted
    absolute: dict[str, str] = {}
    for problem in sorted(result.problems):  # already sorted: one linear pass
        if str(getattr(problem, "severity", "")) != "error":
            continue
        where = absolute.get(problem.file)
        if where is None:
            where = absolute[problem.file] = os.path.abspath(problem.file)
        if where not in first:
            first[where] = problem.format()
    # abspath, not resolve(): a symlink loop raises there
    return {MonitorName(name): first.get(os.path.abspath(file), f"{file}: invalid")
            for name, file in invalid.items()}


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


def at_commit(snap: Snapshot, export: Path, root: Path, commit: str) -> Snapshot:
    """``snap``, read from ``export`` (a commit's files, ``config.gitfollow.export``), as
    if read from the repository at ``root``: monitors' origins and overlays below
    ``root`` (so they do not change from one commit to the next), files in problems
    named ``<commit12>:path``, and ``commit`` as the revision (never dirty)."""
    from dataclasses import replace

    from reconciler.config import files

    full, shown, short = str(export) + "/", files.display(export) + "/", commit[:12] + ":"

    def named(lines: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(line.replace(full, short).replace(shown, short) for line in lines)

    def local(path: Path) -> Path:
        try:
            return root / path.relative_to(export)
        except ValueError:
            return path

    def moved(m: Monitor) -> Monitor:
        return replace(m, origin=local(m.origin),
                       overlay=None if m.overlay is None else local(m.overlay))

    desired = replace(snap.desired,
                      monitors={n: moved(m) for n, m in snap.desired.monitors.items()},
                      invalid={n: named((why,))[0] for n, why in snap.desired.invalid.items()})
    return replace(snap, problems=named(snap.problems), errors=named(snap.errors),
                   error_files=named(snap.error_files), commit=commit, dirty=False,
                   desired=desired, monitors={n: moved(m) for n, m in snap.monitors.items()})


__all__ = ["Snapshot", "action_check", "at_commit", "errors", "git_revision", "invalid_errors",
           "next_pause_expiry", "read"]
