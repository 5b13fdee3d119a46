"""The diff between the desired set and the running registry (DESIGN.md §3.5).

Pure: no I/O. ``diff`` returns one ``Change`` per monitor that is desired or
running, each with its action and the reason for it:

========== ==================================================================
``start``   desired, not running (``+``)
``stop``    running, not desired (``-``): removed file, paused, disabled, owner elsewhere
``replace`` fingerprint changed (``-/+``): the old evaluator stops, the new one starts,
            with the baseline kept or a new one (``conditions.baseline.verdict``)
``update``  only non-identity fields changed (``~``, e.g. ``rateLimit``): in place,
            baseline kept
``rename``  a stopped name and a started name share one fingerprint: state carried over
``unchanged``
``keep``    the file is invalid, or the monitor is a held duplicate: the last
            applied valid version keeps running
========== ==================================================================
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.conditions import baseline
from reconciler.conditions import spec as condition_spec
from reconciler.model import Fingerprint, Monitor, MonitorName
from reconciler.state import registry


class ChangeKind(enum.StrEnum):
    """What a reconcile does to one monitor (a plan line's kind; ``Change.action`` and
    the plan JSON's ``action`` key hold it). Not a monitor's ``action``."""

    START = "start"
    STOP = "stop"
    REPLACE = "replace"
    UPDATE = "update"
    RENAME = "rename"
    UNCHANGED = "unchanged"
    KEEP = "keep"


SYMBOLS: dict[ChangeKind, str] = {
    ChangeKind.START: "+",
    ChangeKind.STOP: "-",
    ChangeKind.REPLACE: "-/+",
    ChangeKind.UPDATE: "~",
    ChangeKind.RENAME: ">",
    ChangeKind.UNCHANGED: "=",
    ChangeKind.KEEP: "!",
}

CHANGING = frozenset({ChangeKind.START, ChangeKind.STOP, ChangeKind.REPLACE, ChangeKind.UPDATE,
                      ChangeKind.RENAME})

DURATION_FIELDS = frozenset({"source.interval", "source.timeout", "source.backoff",
                             "action.timeout", "action.maxTime", "rateLimit.per"})
"""The ``FieldChange.path`` values that hold durations (seconds, float): the text plan
shows them with ``durations.format``; JSON keeps seconds."""


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One changed field: a dotted path (``condition.match``) and its old and new values."""

    path: str
    old: Any
    new: Any

    def to_json(self) -> dict[str, Any]:
        """``{"field", "old", "new"}``."""
        return {"field": self.path, "old": self.old, "new": self.new}


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why a known monitor is not in the desired set of this device.

    Attributes:
        kind: ``disabled`` | ``paused`` | ``elsewhere`` | ``autopaused`` | ``invalid`` |
            ``duplicate``.
        reason: one human line (which overlay paused it, who owns it and why, ...).
    """

    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class Change:
    """One monitor's line of the plan.

    Attributes:
        action: what happens.
        name: the monitor (the new name for a rename).
        reason: one human line saying why.
        monitor: the desired version (None for a stop).
        old: the running version (None for a start).
        old_name: the name it is renamed from (rename only).
        fields: what changed, from what to what (replace, update).
        error: the file's problem (``keep``, or a start of a last applied version).
        held: True when the change is held back (mass-stop guard).
    """

    action: ChangeKind
    name: MonitorName
    reason: str
    monitor: Monitor | None = None
    old: Monitor | None = None
    old_name: MonitorName | None = None
    fields: tuple[FieldChange, ...] = ()
    error: str | None = None
    held: bool = False

    @property
    def changing(self) -> bool:
        """True for start, stop, replace, update and rename."""
        return self.action in CHANGING

    def to_json(self) -> dict[str, Any]:
        """The change as plan JSON (``monitor`` is the serialized desired monitor)."""
        shown = self.monitor or self.old
        return {
            "action": self.action.value,
            "name": self.name,
            "oldName": self.old_name,
            "reason": self.reason,
            "fingerprint": None if self.monitor is None else self.monitor.fingerprint,
            "oldFingerprint": None if self.old is None else self.old.fingerprint,
            "origin": None if shown is None else str(shown.origin),
            "fields": [f.to_json() for f in self.fields],
            "error": self.error,
            "held": self.held,
        }


def display(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` when below it, else as is (pure, no file system)."""
    text = str(path)
    if root is not None:
        prefix = str(root).rstrip("/") + "/"
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _flatten(prefix: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        # an empty mapping has no leaves: ``labels: {}`` -> ``{team: ci}`` is one change,
        # ``labels.team: null -> "ci"``
        for key in sorted(value):
            yield from _flatten(f"{prefix}.{key}" if prefix else str(key), value[key])
    else:
        yield prefix, value


def field_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    """Leaf-level differences between two JSON-like mappings, as dotted paths, sorted.

    A key missing on one side (or under an empty mapping) shows as ``None`` there.
    """
    before = dict(_flatten("", old))
    after = dict(_flatten("", new))
    return tuple(
        FieldChange(key, before.get(key), after.get(key))
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    )


def identity_changes(old: Monitor, new: Monitor) -> tuple[FieldChange, ...]:
    """What changed in source, condition and action (the fingerprint's inputs)."""
    return field_changes(
        {"source": old.source.to_json(), "condition": condition_spec.to_json(old.condition),
         "action": old.action.to_json()},
        {"source": new.source.to_json(), "condition": condition_spec.to_json(new.condition),
         "action": new.action.to_json()},
    )


def update_changes(old: Monitor, new: Monitor) -> tuple[FieldChange, ...]:
    """What changed among the non-identity fields an update applies in place."""
    return field_changes(registry.update_fields(old), registry.update_fields(new))


def replace_changes(old: Monitor, new: Monitor) -> tuple[FieldChange, ...]:
    """Every changed field of a replace: source, condition and action, and the
    non-identity fields (labels, description, rateLimit, placement...) that change
    with it, sorted by path."""
    return tuple(sorted(identity_changes(old, new) + update_changes(old, new),
                        key=lambda f: f.path))


def diff(
    desired: Mapping[MonitorName, Monitor],
    running: Mapping[MonitorName, Monitor],
    *,
    excluded: Mapping[MonitorName, Exclusion] | None = None,
    invalid: Mapping[MonitorName, str] | None = None,
    start_reasons: Mapping[MonitorName, str] | None = None,
    duplicates: Mapping[MonitorName, str] | None = None,
    root: Path | None = None,
) -> list[Change]:
    """Compare the desired set with what runs; return changes sorted by name.

    Args:
        desired: name -> monitor this device should run (for an invalid file that
            has a last applied version: that version).
        running: name -> the monitor as applied in the running registry.
        excluded: why known monitors are not desired (for stop reasons).
        invalid: name -> the file's error, for monitors whose file is invalid.
        start_reasons: a better start reason than "new file" (e.g. "pause expired").
        duplicates: name -> why it is held as a duplicate; ``desired`` holds its last
            applied version (kept like an invalid file's, the reason as its error).
        root: origins below it are shown relative to it.

    Returns:
        One change per name in ``desired | running``; a rename replaces the stop
        of the old name and the start of the new one when exactly one stopped and
        one started monitor share a fingerprint.
    """
    excluded = excluded or {}
    invalid = invalid or {}
    start_reasons = start_reasons or {}
    duplicates = duplicates or {}
    changes: dict[MonitorName, Change] = {}
    for name in desired.keys() | running.keys():
        want = desired.get(name)
        have = running.get(name)
        error = invalid.get(name)
        held = duplicates.get(name)
        if held is not None and want is not None:
            dup = held.split(";")[0]
            if have is None:
                changes[name] = Change(ChangeKind.START, name,
                                       f"{dup}: starting its last applied version",
                                       monitor=want, error=held)
            elif want.fingerprint == have.fingerprint:
                changes[name] = Change(ChangeKind.KEEP, name, dup,
                                       monitor=want, old=have, error=held)
            else:
                changes[name] = Change(ChangeKind.REPLACE, name,
                                       f"{dup}: back to its last applied version",
                                       monitor=want, old=have,
                                       fields=replace_changes(have, want), error=held)
            continue
        if want is None:
            assert have is not None
            why = excluded.get(name)
            if why is not None:
                reason = why.reason
            elif error is not None:
                reason = f"file is invalid and no valid version was applied: {error}"
            else:
                reason = f"removed file {display(have.origin, root)}"
            changes[name] = Change(ChangeKind.STOP, name, reason, old=have, error=error)
        elif have is None:
            if error is not None:
                reason = "file is invalid: starting its last applied valid version"
            else:
                reason = start_reasons.get(name) or f"new file {display(want.origin, root)}"
            changes[name] = Change(ChangeKind.START, name, reason, monitor=want, error=error)
        elif error is not None and want.fingerprint == have.fingerprint:
            changes[name] = Change(ChangeKind.KEEP, name,
                                   "file is invalid: its last applied valid version keeps running",
                                   monitor=want, old=have, error=error)
        elif want.fingerprint != have.fingerprint:
            changes[name] = Change(ChangeKind.REPLACE, name,
                                   "fingerprint changed: " + baseline.verdict(have, want).why,
                                   monitor=want, old=have, fields=replace_changes(have, want))
        elif registry.config_hash(want) != registry.config_hash(have):
            fields = update_changes(have, want)
            what = ", ".join(dict.fromkeys(f.path.split(".")[0] for f in fields)) or "config"
            changes[name] = Change(ChangeKind.UPDATE, name,
                                   f"{what} changed: updated in place, baseline kept",
                                   monitor=want, old=have, fields=fields)
        else:
            changes[name] = Change(ChangeKind.UNCHANGED, name, "unchanged", monitor=want, old=have)
    _pair_renames(changes, excluded)
    return [changes[name] for name in sorted(changes)]


def _pair_renames(changes: dict[MonitorName, Change],
                  excluded: Mapping[MonitorName, Exclusion]) -> None:
    stops: dict[Fingerprint, list[Change]] = {}
    starts: dict[Fingerprint, list[Change]] = {}
    for change in changes.values():
        if (change.action is ChangeKind.STOP and change.old is not None and change.error is None
                and change.name not in excluded):
            stops.setdefault(change.old.fingerprint, []).append(change)
        elif change.action is ChangeKind.START and change.monitor is not None and not change.error:
            starts.setdefault(change.monitor.fingerprint, []).append(change)
    for fp, stopped in stops.items():
        started = starts.get(fp, [])
        if len(stopped) != 1 or len(started) != 1:
            continue
        old, new = stopped[0], started[0]
        assert new.monitor is not None and old.old is not None
        del changes[old.name]
        changes[new.name] = Change(
            ChangeKind.RENAME, new.name,
            f"renamed from {old.name}: same fingerprint, state carried over",
            monitor=new.monitor, old=old.old, old_name=old.name,
            fields=update_changes(old.old, new.monitor))


__all__ = [
    "DURATION_FIELDS",
    "SYMBOLS",
    "Change",
    "ChangeKind",
    "Exclusion",
    "FieldChange",
    "diff",
    "field_changes",
    "replace_changes",
]
