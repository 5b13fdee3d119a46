"""The plan: the desired set for this device, diffed against the running registry.

Pure: callers load files, state and the git revision, and pass them in as a
``Basis`` (``daemon.handover``, ``daemon.main``); nothing here reads or writes. A
``Plan`` is also the saved-plan file of ``monitors plan --out`` (``to_json``; read
back and checked by ``planning.saved``). The desired set is ``planning.desired``.

Mass-stop guard: a plan that stops more than half of the running monitors when
at least five run, or every running monitor when at least two run, is held
(``Change.held``) unless allowed: an empty checkout, a wrong path or a bad
overlay must not silently switch everything off. A single running monitor may
be stopped without the guard (deleting one's only monitor is ordinary). Stops
that are deliberate (``DELIBERATE``: a valid pause overlay, ``enabled: false``,
a rate-limit auto-pause) are neither counted nor held.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from reconciler.model import Monitor, MonitorName
from reconciler.planning import diff as diff_mod
from reconciler.planning.desired import Desired
from reconciler.planning.diff import Change, ChangeKind, Exclusion

PLAN_FORMAT = "monitors-plan"
PLAN_VERSION = 1
MASS_STOP_MIN = 5
DELIBERATE = frozenset({"paused", "disabled", "autopaused", "completed"})
"""Exclusion kinds whose stops are deliberate: not counted by the mass-stop guard."""


@dataclass(frozen=True, slots=True)
class Basis:
    """What a plan is made against, besides the desired and running sets.

    Attributes:
        device: this device.
        daemon_running: False: the running state was taken as empty.
        generation: the running generation (0 on a first run).
        digest: the loader digest (system/, monitors.d/, overlays).
        daemon_pid: the daemon's pid when running.
        commit, dirty: the repository revision (None outside git).
        problems: formatted problems of the layers.
        created_at: ISO-8601 UTC.
        root: the repository root (paths in the plan are shown relative to it).
        error_files: the monitor and overlay files with at least one error.
        settings_digest: the digest of monitors.toml (empty when not known).
        git: git mode: the running side's followed ref and revisions
            (``daemon.protocol.GitRevisions``: ``ref``, ``lastAttemptedRevision``,
            ``lastAppliedRevision``, ``error``), else None.
        against: what the running state was read from when not this device's
            daemon (``plan --against FILE``: the file), else "".
        owners: ``owners:`` monitors desired here -> this device's role from the
            daemon (``holder: a``, ``standby (holder: a)``; ``daemon.protocol.owner_role``).
    """

    device: str
    daemon_running: bool
    generation: int
    digest: str
    daemon_pid: int | None = None
    commit: str | None = None
    dirty: bool = False
    problems: tuple[str, ...] = ()
    created_at: str = ""
    root: Path | str = ""
    error_files: tuple[str, ...] = ()
    settings_digest: str = ""
    git: Mapping[str, Any] | None = None
    against: str = ""
    owners: Mapping[str, str] = field(default_factory=dict)


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
        git, against, owners: as ``Basis``.
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
    git: Mapping[str, Any] | None = None
    against: str = ""
    owners: Mapping[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Change kind -> number of changes (every action present, held stops included)."""
        counts = {a.value: 0 for a in ChangeKind}
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
            "git": dict(self.git) if self.git is not None else None,
            "lastAppliedRevision": (self.git or {}).get("lastAppliedRevision"),
            "lastAttemptedRevision": (self.git or {}).get("lastAttemptedRevision"),
            "against": self.against or None,
            "owners": dict(self.owners),
        }


def mass_stop_reason(changes: Iterable[Change], running: int, *,
                     deliberate: Collection[MonitorName] = ()) -> str | None:
    """Why the mass-stop guard trips for these changes, or None (module docstring).

    Args:
        running: how many monitors run now.
        deliberate: names whose stop is deliberate (paused, disabled, auto-paused):
            not counted.
    """
    stops = sum(1 for c in changes if c.action is ChangeKind.STOP and c.name not in deliberate)
    if not stops:
        return None
    if running >= 2 and stops >= running:
        return (f"would stop all {running} running monitors; check the checkout, the layer "
                "paths and the overlays, or pass --allow-mass-stop")
    if running >= MASS_STOP_MIN and stops * 2 > running:
        return (f"would stop {stops} of {running} running monitors (more than half); check "
                "the checkout, the layer paths and the overlays, or pass --allow-mass-stop")
    return None


def make(desired: Desired, running: Mapping[MonitorName, Monitor], basis: Basis, *,
         allow_mass_stop: bool = False) -> Plan:
    """Diff ``desired`` against ``running`` and wrap the result, with ``basis``, as a ``Plan``.

    When the mass-stop guard trips and ``allow_mass_stop`` is False, every stop
    that is not deliberate (``DELIBERATE``) is marked ``held`` and
    ``Plan.mass_stop`` says why.
    """
    root = basis.root
    changes = diff_mod.diff(desired.monitors, running, excluded=desired.excluded,
                            invalid=desired.invalid, start_reasons=desired.start_reasons,
                            duplicates=desired.duplicates, root=Path(root) if root else None)
    deliberate = {n for n, e in desired.excluded.items() if e.kind in DELIBERATE}
    guard = mass_stop_reason(changes, len(running), deliberate=deliberate)
    if guard is not None and not allow_mass_stop:
        changes = [replace(c, held=True)
                   if c.action is ChangeKind.STOP and c.name not in deliberate else c
                   for c in changes]
    else:
        guard = None if allow_mass_stop else guard
    shown = {n: e for n, e in desired.excluded.items() if n not in running}
    return Plan(
        changes=tuple(changes),
        excluded=shown,
        device=basis.device,
        daemon_running=basis.daemon_running,
        daemon_pid=basis.daemon_pid,
        generation=basis.generation,
        digest=basis.digest,
        desired_digest=desired.digest(),
        commit=basis.commit,
        dirty=basis.dirty,
        mass_stop=guard,
        problems=tuple(basis.problems),
        created_at=basis.created_at,
        root=str(root),
        error_files=tuple(sorted(set(basis.error_files))),
        settings_digest=basis.settings_digest,
        git=basis.git,
        against=basis.against,
        owners=basis.owners,
    )
