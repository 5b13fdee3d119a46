"""The desired set of one device: what it should run, and why the rest is not run here.

Pure: callers load files, state and placement, and pass them in. A monitor is
desired when it is enabled, not paused by an overlay, owned here and not
auto-paused; an invalid file keeps its last applied version.

Duplicates: among the monitors this device would run, two or more sharing one
fingerprint without ``allowDuplicate: true`` are one trigger fired twice (lint's
``duplicate-fingerprint``). One of them is planned: the one whose applied
version already has that fingerprint, else the first by name; the others are
held like invalid files (kept at their last applied version when they have one,
else not started), with the reason ``duplicate of <name> (same fingerprint); ...``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from reconciler.conditions import lifecycle
from reconciler.config import fingerprint as fingerprint_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning.diff import Exclusion
from reconciler.state import registry


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

    def known(self) -> frozenset[MonitorName]:
        """Every monitor the layers define for this device: desired here, or excluded
        with a reason (paused, disabled, auto-paused, completed, placed elsewhere,
        invalid, duplicate). Not in it: a monitor whose file is gone, the old name of
        a rename (``daemon.metrics.forget``)."""
        return frozenset(self.monitors.keys() | self.excluded.keys())

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
    completed: Mapping[MonitorName, tuple[str, str]] | None = None,
) -> Desired:
    """Select what this device runs: enabled, not paused, owned here, not auto-paused.

    Args:
        monitors: every valid resolved monitor (``LoadResult.monitors``).
        owner: the placement decision for one monitor on this device.
        invalid: name -> error for files that exist but are invalid.
        last_good: name -> the last applied valid version (running registry);
            an invalid monitor with one stays desired as that version.
        autopaused: name -> why the rate-limit guard auto-paused it (running state).
        completed: name -> ``(key, reason)`` of a completed self-ending monitor
            (``Store.completions``): excluded while its ``conditions.lifecycle.key``
            is that key.

    Duplicates (``held_duplicates``) are held: kept at their last applied version
    when they have one (``Desired.duplicates`` says why), else excluded as ``duplicate``.
    """
    invalid = dict(invalid or {})
    last_good = last_good or {}
    autopaused = autopaused or {}
    completed = completed or {}
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
        done = completed.get(name)
        if done is not None and done[0] == lifecycle.key(monitor):
            excluded[name] = Exclusion("completed", f"completed ({done[1]})")
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
