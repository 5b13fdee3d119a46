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
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors, fleet, settings
from reconciler.config import problems as problems_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning import placement
from reconciler.planning import plan as plan_mod


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one plan is made from.

    Attributes:
        desired: the desired set of this device (last applied versions for invalid files).
        monitors: every valid resolved monitor (for list/view).
        digest: the loader digest of the layers.
        problems: every problem, formatted (errors of invalid files among them).
        error_count: number of error-severity problems.
        commit, dirty: the repository revision (None outside a git checkout).
        placements: name -> placement decision for every valid monitor.
        error_files: the files with at least one error-severity problem, sorted.
        settings_error: why monitors.toml's agents, routines, channels or owner are
            invalid (``monitors.toml: owner.channels: ...``), or None. Action names
            are not checked then.
    """

    desired: plan_mod.Desired
    monitors: Mapping[MonitorName, Monitor]
    digest: str
    problems: tuple[str, ...]
    error_count: int
    commit: str | None
    dirty: bool
    placements: Mapping[MonitorName, placement.Placement]
    error_files: tuple[str, ...] = ()
    settings_error: str | None = None


def now_iso() -> str:
    """The current UTC time as ISO-8601 with seconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def git_revision(root: Path) -> tuple[str | None, bool]:
    """``(commit sha, dirty)`` of the git checkout holding ``root``; ``(None, False)``
    outside git or before the first commit. Dirty counts only the layer files'
    directory tree (``root``), untracked files included."""
    if not _inside_git(root):
        return None, False
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
    except Exception:  # a broken .git must not break planning; the plan then has no commit
        return None, False


def _inside_git(root: Path) -> bool:
    return any((candidate / ".git").exists() for candidate in (root, *root.parents))


ActionCheck = Callable[[Mapping[str, Any]], list[tuple[str, str]]]
"""``config.loader.ActionCheck``: ``(dotted field, message)`` pairs for one action mapping."""


def action_check(cfg: settings.Settings
                 ) -> tuple[ActionCheck | None, list[problems_mod.Problem]]:
    """The action check ``monitors lint``, ``plan`` and the daemon share.

    ``actions.checks.references`` bound to the parsed monitors.toml: agent, routine
    and channel names must be defined, a run needs an agent or a usable command.
    Templates are checked by ``config.semantic`` (without Jinja2 unless a template
    needs it), not here. Pure apart from reading ``cfg.toml``; imports no click.

    Returns:
        ``(check, [])`` with a picklable check for ``config.loader.load(action_check=)``,
        or ``(None, [problem])`` when monitors.toml's agents, routines, channels or
        owner are invalid: one ``settings`` error naming ``<root>/monitors.toml``
        (names are not checked then).
    """
    import functools

    from reconciler.actions import checks, options

    try:
        config = options.parse(cfg.toml)
    except errors.ConfigError as e:
        path = cfg.root / settings.SETTINGS_FILE
        return None, [problems_mod.error(str(path), 1, 1, "", str(e), "settings")]
    return functools.partial(checks.references, config=config), []


def _load(cfg: settings.Settings, check: ActionCheck | None = None) -> Any:
    from reconciler.config import loader

    return loader.load(cfg, action_check=check)


def invalid_errors(result: Any) -> dict[MonitorName, str]:
    """name -> the first error line of each invalid monitor file of a ``LoadResult``."""
    out: dict[MonitorName, str] = {}
    for name, file in dict(getattr(result, "invalid", {}) or {}).items():
        wanted = Path(file).resolve()
        message = f"{file}: invalid"
        for problem in sorted(result.problems):
            if str(getattr(problem, "severity", "")) != "error":
                continue
            if Path(problem.file).resolve() == wanted:
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


def read(
    cfg: settings.Settings,
    *,
    last_good: Mapping[MonitorName, Monitor] | None = None,
    autopaused: Mapping[MonitorName, str] | None = None,
    with_git: bool = True,
    loader: Callable[[settings.Settings], Any] | None = None,
) -> Snapshot:
    """Load the layers and compute the desired set of ``cfg.device``.

    Args:
        last_good: the applied set (running registry) for last-known-good versions.
        autopaused: name -> reason, from running state.
        loader: stands in for ``config.loader.load`` (then actions are not checked).

    A monitor whose action names an undefined agent, routine or channel is invalid
    (``unknown-reference``: kept at its last applied version, else not started); a
    missing layer directory is an error problem (``missing-layer``); an invalid
    monitors.toml is ``Snapshot.settings_error`` and a ``settings`` problem.

    Raises:
        errors.ConfigError: the fleet file or settings are unusable.
    """
    from reconciler.config import lint

    check, settings_problems = action_check(cfg)
    result = loader(cfg) if loader is not None else _load(cfg, check)
    fleet_doc = fleet.load(cfg.fleet_file)
    placements = {name: placement.owner_decision(m, device=cfg.device, fleet=fleet_doc)
                  for name, m in result.monitors.items()}

    def owner(m: Monitor) -> placement.Placement:
        return placements.get(m.name) or placement.owner_decision(m, device=cfg.device,
                                                                   fleet=fleet_doc)

    invalid = invalid_errors(result)
    desired = plan_mod.desired_set(result.monitors, owner=owner, invalid=invalid,
                                   last_good=last_good, autopaused=autopaused)
    desired.start_reasons.update(expired_pauses(result, desired.monitors, cfg.root))
    commit, dirty = git_revision(cfg.root) if with_git else (None, False)
    problems = sorted([*result.problems, *settings_problems, *lint.layer_problems(cfg)])
    return Snapshot(
        desired=desired,
        monitors=result.monitors,
        digest=str(getattr(result, "digest", "")),
        problems=tuple(p.format() for p in problems),
        error_count=sum(1 for p in problems if str(p.severity) == "error"),
        commit=commit,
        dirty=dirty,
        placements=placements,
        error_files=tuple(sorted({str(p.file) for p in problems
                                  if str(p.severity) == "error"})),
        settings_error=settings_problems[0].message if settings_problems else None,
    )


__all__ = ["Snapshot", "action_check", "errors", "git_revision", "invalid_errors", "now_iso",
           "read"]
