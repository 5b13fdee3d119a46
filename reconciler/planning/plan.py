"""The plan: desired set for this device, diffed against the running registry.

Pure: callers load files, state and the git revision, and pass them in
(``cli.plan``, ``daemon.main``); nothing here reads or writes. A ``Plan`` is
also the saved-plan file of ``monitors plan --out`` (``to_json`` /
``from_json``), tied to what it was made against: the repository commit, the
loader digest (``system/``, ``monitors.d/`` and overlays), a digest of the
desired set (covers fleet, device and expired pauses), the digest of
monitors.toml (``settingsDigest``), the running generation, and whether a
daemon ran (and its pid): its running set is what the plan was diffed against.
``stale_reasons`` compares a saved plan with a fresh one.

Mass-stop guard: a plan that stops more than half of the running monitors when
at least five run, or every running monitor when at least two run, is held
(``Change.held``) unless allowed: an empty checkout, a wrong path or a bad
overlay must not silently switch everything off. A single running monitor may
be stopped without the guard (deleting one's only monitor is ordinary). Stops
that are deliberate (``DELIBERATE``: a valid pause overlay, ``enabled: false``,
a rate-limit auto-pause) are neither counted nor held.

Duplicates: among the monitors this device would run, two or more sharing one
fingerprint without ``allowDuplicate: true`` are one trigger fired twice (lint's
``duplicate-fingerprint``). One of them is planned: the one whose applied
version already has that fingerprint, else the first by name; the others are
held like invalid files (kept at their last applied version when they have one,
else not started), with the reason ``duplicate of <name> (same fingerprint); ...``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from reconciler.config import fingerprint as fingerprint_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning import diff as diff_mod
from reconciler.planning.diff import Action, Change, Exclusion
from reconciler.state import registry

PLAN_FORMAT = "monitors-plan"
PLAN_VERSION = 1
MASS_STOP_MIN = 5
DELIBERATE = frozenset({"paused", "disabled", "autopaused"})
"""Exclusion kinds whose stops are deliberate: not counted by the mass-stop guard."""


class PlacementLike(Protocol):
    """What ``placement.owner_decision`` returns (runs_here, owner, reason)."""

    @property
    def runs_here(self) -> bool: ...

    @property
    def owner(self) -> str | None: ...

    @property
    def reason(self) -> str: ...


OwnerFn = Callable[[Monitor], PlacementLike]


@dataclass(frozen=True, slots=True)
class Desired:
    """The desired set of one device and why the other known monitors are not in it.

    Attributes:
        monitors: name -> the monitor this device should run.
        excluded: name -> why a known monitor is not desired here.
        invalid: name -> the error of a monitor whose file is invalid.
        start_reasons: name -> a start reason better than "new file".
        duplicates: name -> why it is held as a duplicate (``duplicate_reason``); such a
            monitor is in ``monitors`` at its last applied version, or in ``excluded``.
    """

    monitors: dict[MonitorName, Monitor]
    excluded: dict[MonitorName, Exclusion]
    invalid: dict[MonitorName, str]
    start_reasons: dict[MonitorName, str] = field(default_factory=dict)
    duplicates: dict[MonitorName, str] = field(default_factory=dict)

    def digest(self) -> str:
        """``sha256:`` over (name, fingerprint, update fields) of every desired monitor."""
        rows = [[n, m.fingerprint, registry.update_fields(m)]
                for n, m in sorted(self.monitors.items())]
        return "sha256:" + hashlib.sha256(fingerprint_mod.canonical(rows)).hexdigest()


def pause_reason(monitor: Monitor) -> str:
    """``paused by overlay FILE (reason "...", until ...)`` for a paused monitor."""
    pause = monitor.pause
    where = f"overlay {monitor.overlay}" if monitor.overlay else "an overlay"
    extra = []
    if pause is not None and pause.reason:
        extra.append(f'reason "{pause.reason}"')
    if pause is not None and pause.until:
        extra.append(f"until {pause.until}")
    if pause is not None and pause.author:
        extra.append(f"by {pause.author}")
    return f"paused by {where}" + (f" ({', '.join(extra)})" if extra else "")


def duplicate_reason(kept: MonitorName) -> str:
    """``duplicate of <kept> (same fingerprint); set allowDuplicate: true if deliberate``."""
    return (f"duplicate of {kept} (same fingerprint); set allowDuplicate: true if "
            "deliberate")


def held_duplicates(monitors: Mapping[MonitorName, Monitor], *,
                    last_good: Mapping[MonitorName, Monitor] | None = None
                    ) -> dict[MonitorName, MonitorName]:
    """name -> the monitor it duplicates, for the duplicates that must not run.

    Within each group of ``monitors`` sharing a fingerprint, only the members
    without ``allow_duplicate`` count (lint's ``duplicate-fingerprint`` rule); when
    two or more remain, one is kept: the first by name among those whose applied
    version (``last_good``) has that fingerprint, else the first by name. Pure.
    """
    last_good = last_good or {}
    groups: dict[str, list[MonitorName]] = {}
    for name, monitor in monitors.items():
        if not monitor.allow_duplicate:
            groups.setdefault(monitor.fingerprint, []).append(name)
    held: dict[MonitorName, MonitorName] = {}
    for fp, names in groups.items():
        if len(names) < 2:
            continue
        names.sort()
        applied = [n for n in names if (g := last_good.get(n)) is not None
                   and g.fingerprint == fp]
        kept = (applied or names)[0]
        held.update({n: kept for n in names if n != kept})
    return held


def desired_set(
    monitors: Mapping[MonitorName, Monitor],
    *,
    owner: OwnerFn,
    invalid: Mapping[MonitorName, str] | None = None,
    last_good: Mapping[MonitorName, Monitor] | None = None,
    autopaused: Mapping[MonitorName, str] | None = None,
) -> Desired:
    """Select what this device runs: enabled, not paused, owned here, not auto-paused.

    Args:
        monitors: every valid resolved monitor (``LoadResult.monitors``).
        owner: the placement decision for one monitor on this device.
        invalid: name -> error for files that exist but are invalid.
        last_good: name -> the last applied valid version (running registry);
            an invalid monitor with one stays desired as that version.
        autopaused: name -> why the rate-limit guard auto-paused it (running state).

    Duplicates (``held_duplicates``) are held: kept at their last applied version
    when they have one (``Desired.duplicates`` says why), else excluded as ``duplicate``.
    """
    invalid = dict(invalid or {})
    last_good = last_good or {}
    autopaused = autopaused or {}
    desired: dict[MonitorName, Monitor] = {}
    excluded: dict[MonitorName, Exclusion] = {}
    for name, monitor in monitors.items():
        if not monitor.enabled:
            excluded[name] = Exclusion("disabled", "disabled in its file (enabled: false)")
            continue
        if monitor.pause is not None:
            excluded[name] = Exclusion("paused", pause_reason(monitor))
            continue
        placed = owner(monitor)
        if not placed.runs_here:
            who = f"owner is {placed.owner}" if placed.owner else "not owned by this device"
            excluded[name] = Exclusion("elsewhere", f"{who}: {placed.reason}")
            continue
        if name in autopaused:
            excluded[name] = Exclusion("autopaused", f"auto-paused: {autopaused[name]}")
            continue
        desired[name] = monitor
    duplicates: dict[MonitorName, str] = {}
    for name, kept in held_duplicates(desired, last_good=last_good).items():
        reason = duplicate_reason(kept)
        del desired[name]
        good = last_good.get(name)
        if good is not None:
            desired[name] = good
            duplicates[name] = reason
        else:
            excluded[name] = Exclusion("duplicate", reason)
    for name, error in invalid.items():
        if name in desired or name in excluded:
            continue
        good = last_good.get(name)
        if good is not None:
            desired[name] = good
        else:
            excluded[name] = Exclusion("invalid", f"file is invalid, never applied: {error}")
    return Desired(desired, excluded, invalid, duplicates=duplicates)


@dataclass(frozen=True, slots=True)
class Plan:
    """One plan: the changes and what it was made against.

    Attributes:
        changes: one per desired or running monitor, sorted by name.
        excluded: known monitors neither desired nor running here, with why.
        device: this device.
        daemon_running: False: running state was taken as empty.
        daemon_pid: the daemon's pid when running.
        generation: the running generation the plan was made against (0 on a first run).
        digest: the loader digest (system/, monitors.d/, overlays).
        desired_digest: ``Desired.digest()``.
        commit, dirty: the repository revision (None outside git).
        mass_stop: why the mass-stop guard holds the stops, or None.
        problems: formatted problems of the layers (errors and warnings; the text output
            lists the errors not already shown beside their monitors).
        created_at: ISO-8601 UTC.
        error_files: the monitor and overlay files with at least one error (sorted);
            ``plan`` exits 1 when there is one (Terraform: errors -> 1).
        settings_digest: the digest of the monitors.toml the plan was made with
            (``client.control.settings_digest``); empty when not known.
    """

    changes: tuple[Change, ...]
    excluded: Mapping[MonitorName, Exclusion]
    device: str
    daemon_running: bool
    generation: int
    digest: str
    desired_digest: str
    daemon_pid: int | None = None
    commit: str | None = None
    dirty: bool = False
    mass_stop: str | None = None
    problems: tuple[str, ...] = ()
    created_at: str = ""
    root: str = ""
    error_files: tuple[str, ...] = ()
    settings_digest: str = ""

    def counts(self) -> dict[str, int]:
        """Action value -> number of changes (every action present, held stops included)."""
        counts = {a.value: 0 for a in Action}
        for change in self.changes:
            counts[change.action.value] += 1
        return counts

    @property
    def has_changes(self) -> bool:
        """True when applying would start, stop, replace, update or rename anything."""
        return any(c.changing for c in self.changes)

    def changing(self) -> list[Change]:
        """The changes that are not ``unchanged``/``keep``."""
        return [c for c in self.changes if c.changing]

    def summary(self) -> str:
        """``Plan: 2 to start, 1 to replace, 1 to update, 1 to stop, 12 unchanged.`` or
        ``No changes. 12 monitors run as the repository says.``, followed by
        `` 2 files have errors (`monitors lint` shows them).`` when ``error_files``."""
        return self._changes_summary() + self.errors_summary()

    def errors_summary(self) -> str:
        """`` 2 files have errors (`monitors lint` shows them).`` (leading space), or
        ``""`` when no file has errors."""
        n = len(self.error_files)
        if not n:
            return ""
        noun = "file has" if n == 1 else "files have"
        return f" {n} {noun} errors (`monitors lint` shows them)."

    def _changes_summary(self) -> str:
        c = self.counts()
        unchanged = c["unchanged"] + c["keep"]
        if not self.has_changes:
            noun = "monitor" if unchanged == 1 else "monitors"
            verb = "runs" if unchanged == 1 else "run"
            return f"No changes. {unchanged} {noun} {verb} as the repository says."
        parts = [f"{c['start']} to start", f"{c['replace']} to replace",
                 f"{c['update']} to update"]
        if c["rename"]:
            parts.append(f"{c['rename']} to rename")
        parts.append(f"{c['stop']} to stop")
        parts.append(f"{unchanged} unchanged")
        return "Plan: " + ", ".join(parts) + "."

    def to_json(self) -> dict[str, Any]:
        """The versioned plan document (``--json`` and ``--out``)."""
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "createdAt": self.created_at,
            "device": self.device,
            "root": self.root,
            "commit": self.commit,
            "dirty": self.dirty,
            "digest": self.digest,
            "desiredDigest": self.desired_digest,
            "settingsDigest": self.settings_digest,
            "generation": self.generation,
            "daemon": {"running": self.daemon_running, "pid": self.daemon_pid},
            "massStop": self.mass_stop,
            "summary": self.summary(),
            "counts": self.counts(),
            "hasChanges": self.has_changes,
            "changes": [c.to_json() for c in self.changes],
            "excluded": [{"name": n, "kind": e.kind, "reason": e.reason}
                         for n, e in sorted(self.excluded.items())],
            "problems": list(self.problems),
            "errorFiles": list(self.error_files),
        }


@dataclass(frozen=True, slots=True)
class SavedPlan:
    """What a saved plan file is checked against (``monitors apply PLANFILE``)."""

    commit: str | None
    digest: str
    desired_digest: str
    generation: int
    device: str
    summary: str
    doc: Mapping[str, Any]
    settings_digest: str = ""
    daemon_running: bool | None = None
    daemon_pid: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SavedPlan:
        """Parse a ``Plan.to_json`` document.

        Raises:
            ValueError: not a plan file, or a newer version than this one reads.
        """
        if not isinstance(doc, Mapping) or doc.get("format") != PLAN_FORMAT:
            raise ValueError("not a monitors plan file (format is not 'monitors-plan')")
        version = doc.get("version")
        if not isinstance(version, int) or version > PLAN_VERSION:
            raise ValueError(f"plan file version {version!r} is newer than this monitors "
                             f"reads ({PLAN_VERSION})")
        daemon = doc.get("daemon")
        daemon = daemon if isinstance(daemon, Mapping) else {}
        running = daemon.get("running")
        pid = daemon.get("pid")
        try:
            return cls(daemon_running=running if isinstance(running, bool) else None,
                       daemon_pid=pid if isinstance(pid, int) and not isinstance(pid, bool)
                       else None,
                       commit=doc.get("commit"), digest=str(doc["digest"]),
                       desired_digest=str(doc["desiredDigest"]),
                       generation=int(doc["generation"]), device=str(doc["device"]),
                       summary=str(doc.get("summary", "")), doc=doc,
                       settings_digest=str(doc.get("settingsDigest") or ""))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"plan file is missing a field: {e}") from e


def stale_reasons(saved: SavedPlan, current: Plan) -> list[str]:
    """What moved since ``saved`` was made; empty when it still applies.

    Besides files, commit, device, settings and generation: a daemon that was running
    and is not now (its running set was what the plan diffed against; without one the
    running set is empty), one that started since, or one restarted (another pid).
    """
    reasons = []
    if saved.device != current.device:
        reasons.append(f"device changed from {saved.device} to {current.device}")
    if saved.commit != current.commit:
        reasons.append(f"repository commit changed from {_short(saved.commit)} to "
                       f"{_short(current.commit)}")
    if saved.digest != current.digest:
        reasons.append("monitor, system or overlay files changed since the plan was made")
    elif saved.desired_digest != current.desired_digest:
        reasons.append("the desired set changed (fleet file, device, a pause expiry or an "
                       "auto-pause)")
    if saved.settings_digest and current.settings_digest and \
            saved.settings_digest != current.settings_digest:
        reasons.append("monitors.toml changed since the plan was made")
    reasons.extend(_daemon_reasons(saved, current))
    if saved.generation != current.generation:
        reasons.append(f"running generation changed from {saved.generation} to "
                       f"{current.generation} (the daemon reconciled since)")
    return reasons


def _daemon_reasons(saved: SavedPlan, current: Plan) -> list[str]:
    """The running state a plan is diffed against is the daemon's (empty without one):
    a daemon that stopped, started or was restarted since makes the plan stale. Plans
    saved without a ``daemon`` entry are not checked."""
    if saved.daemon_running is None:
        return []
    if saved.daemon_running and not current.daemon_running:
        return [f"the daemon was running when the plan was made (pid {saved.daemon_pid}) "
                "and is not now"]
    if not saved.daemon_running and current.daemon_running:
        return [f"the daemon was not running when the plan was made and is now (pid "
                f"{current.daemon_pid})"]
    if saved.daemon_running and saved.daemon_pid is not None and \
            current.daemon_pid is not None and saved.daemon_pid != current.daemon_pid:
        return [f"the daemon was restarted since the plan was made (pid {saved.daemon_pid}, "
                f"now {current.daemon_pid})"]
    return []


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(no commit)"


def mass_stop_reason(changes: Iterable[Change], running: int, *,
                     deliberate: Collection[MonitorName] = ()) -> str | None:
    """Why the mass-stop guard trips for these changes, or None (module docstring).

    Args:
        running: how many monitors run now.
        deliberate: names whose stop is deliberate (paused, disabled, auto-paused):
            not counted.
    """
    stops = sum(1 for c in changes if c.action is Action.STOP and c.name not in deliberate)
    if not stops:
        return None
    if running >= 2 and stops >= running:
        return (f"would stop all {running} running monitors; check the checkout, the layer "
                "paths and the overlays, or pass --allow-mass-stop")
    if running >= MASS_STOP_MIN and stops * 2 > running:
        return (f"would stop {stops} of {running} running monitors (more than half); check "
                "the checkout, the layer paths and the overlays, or pass --allow-mass-stop")
    return None


def make(
    desired: Desired,
    running: Mapping[MonitorName, Monitor],
    *,
    device: str,
    daemon_running: bool,
    generation: int,
    digest: str,
    daemon_pid: int | None = None,
    commit: str | None = None,
    dirty: bool = False,
    problems: Iterable[str] = (),
    allow_mass_stop: bool = False,
    created_at: str = "",
    root: Path | str = "",
    error_files: Iterable[str] = (),
    settings_digest: str = "",
) -> Plan:
    """Diff ``desired`` against ``running`` and wrap the result as a ``Plan``.

    When the mass-stop guard trips and ``allow_mass_stop`` is False, every stop
    that is not deliberate (``DELIBERATE``) is marked ``held`` and
    ``Plan.mass_stop`` says why.
    """
    changes = diff_mod.diff(desired.monitors, running, excluded=desired.excluded,
                            invalid=desired.invalid, start_reasons=desired.start_reasons,
                            duplicates=desired.duplicates, root=Path(root) if root else None)
    deliberate = {n for n, e in desired.excluded.items() if e.kind in DELIBERATE}
    guard = mass_stop_reason(changes, len(running), deliberate=deliberate)
    if guard is not None and not allow_mass_stop:
        changes = [replace(c, held=True)
                   if c.action is Action.STOP and c.name not in deliberate else c
                   for c in changes]
    else:
        guard = None if allow_mass_stop else guard
    shown = {n: e for n, e in desired.excluded.items() if n not in running}
    return Plan(
        changes=tuple(changes),
        excluded=shown,
        device=device,
        daemon_running=daemon_running,
        daemon_pid=daemon_pid,
        generation=generation,
        digest=digest,
        desired_digest=desired.digest(),
        commit=commit,
        dirty=dirty,
        mass_stop=guard,
        problems=tuple(problems),
        created_at=created_at,
        root=str(root),
        error_files=tuple(sorted(set(error_files))),
        settings_digest=settings_digest,
    )
