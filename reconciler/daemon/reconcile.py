"""One reconcile: snapshot -> plan -> supervisor -> ``running.json``; and crash recovery.

``Reconciler.reconcile`` reads the world (``snapshot.read``, in a worker thread),
plans against the running registry (``planning.plan.make``), lets the supervisor
apply the plan (stop first, then start), and publishes ``running.json`` when its
content changed. Reconciles never overlap (a lock). File and config problems are
logged when they change; held stops at every pass until resolved.

``Reconciler.recover`` runs once at start, before the first reconcile: it sweeps what
a crash left in the state directory and settles fires left unfinished.

No signals, sockets or watching here (``daemon.main``), no control requests
(``daemon.operations``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import redaction, settings, snapshot, timestamps
from reconciler.daemon import metrics, supervisor
from reconciler.daemon import parts as parts_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning import plan as plan_mod
from reconciler.state import direrrors
from reconciler.state import registry as registry_mod

log = logging.getLogger("monitors.daemon")

PAUSE_MARGIN = 0.5
"""Seconds after a pause's ``until`` at which the daemon reconciles to resume the monitor."""


@dataclass(slots=True)
class Last:
    """The last reconcile: when, its plan summary, its trigger, the file problems logged."""

    at: str = ""
    summary: str = ""
    trigger: str = ""
    problems: tuple[str, ...] = ()
    plan: plan_mod.Plan | None = None


class Reconciler:
    """Keeps the registry's running set equal to the repository's desired set.

    Args:
        cfg: the settings in use (``cfg`` is replaced on SIGHUP by ``daemon.main``).
        registry: the running registry (published as ``running.json``).
        redactor: every secret the monitors reference is registered here before they run.
        boot_good: the last applied version of every monitor at start (``running.json``),
            used while its file is invalid.
        allow_mass_stop: never hold stops (``--allow-mass-stop``).
        on_started: called with the names started by a reconcile (the daemon logs their
            first polls); not called for ``--once``.
    """

    def __init__(self, cfg: settings.Settings, registry: registry_mod.Registry, *,
                 redactor: redaction.Redactor, boot_good: Mapping[MonitorName, Monitor],
                 allow_mass_stop: bool = False,
                 on_started: Callable[[list[MonitorName]], None] | None = None) -> None:
        self.cfg = cfg
        self.registry = registry
        self.redactor = redactor
        self.boot_good = dict(boot_good)
        self.allow_mass_stop = allow_mass_stop
        self.on_started = on_started
        self.last = Last()
        self.parts: parts_mod.Parts | None = None  # set once built (``daemon.main``)
        self.pause_due: float | None = None  # monotonic time of the next pause expiry
        self._lock = asyncio.Lock()
        self._published: tuple[dict[str, Any], tuple[int, int, int] | None] | None = None

    def read_snapshot(self, last_good: Mapping[MonitorName, Monitor], *,
                      with_git: bool = True) -> snapshot.Snapshot:
        """``snapshot.read`` with the auto-pauses of the state directory (a worker thread:
        both list and read files)."""
        return snapshot.read(self.cfg, last_good=last_good, autopaused=self._autopaused(),
                             with_git=with_git)

    def register_secrets(self, snap: snapshot.Snapshot) -> None:
        """Register every secret the snapshot's monitors and monitors.toml reference
        (``redaction.collect``) before anything of theirs runs."""
        monitors = [*snap.monitors.values(), *snap.desired.monitors.values()]
        self.redactor.add_all(redaction.collect(monitors, self.cfg.toml, os.environ))

    def _autopaused(self) -> dict[MonitorName, str]:
        return {} if self.parts is None else self.parts.store.autopause_reasons()

    def _last_good(self) -> dict[MonitorName, Monitor]:
        good = dict(self.boot_good)
        good.update(supervisor.running_monitors(self.registry))
        return good

    async def recover(self) -> None:
        """Sweep crash leftovers (``state.leftovers``) and settle unfinished fires
        (``actions.recovery``), each logged in one line."""
        from reconciler.actions import recovery
        from reconciler.state import leftovers

        assert self.parts is not None
        swept = await asyncio.to_thread(leftovers.sweep, self.cfg.state_dir)
        if swept.summary():
            log.info("%s", swept.summary())
        for line in swept.kept:
            log.warning("%s", line)
        snap = await asyncio.to_thread(self.read_snapshot, self.boot_good, with_git=False)
        self.register_secrets(snap)
        monitors: dict[str, Monitor] = {str(n): m for n, m in snap.desired.monitors.items()}
        done = await recovery.recover(self.parts.store, monitors, self.parts.dispatcher)
        for item in done:
            log.info("recovered %s fire %s (%s): %s", item.monitor, item.event_id,
                     item.outcome, item.reason)

    async def reconcile(self, *, trigger: str = "", allow_mass_stop: bool = False
                        ) -> tuple[plan_mod.Plan, supervisor.Applied]:
        """Load the layers, plan against the registry, apply, publish ``running.json``
        (timed and counted in ``daemon.metrics``).

        Raises:
            errors.StateError: ``running.json`` cannot be published.
        """
        started = time.monotonic()
        try:
            plan, applied = await self._reconcile(trigger=trigger,
                                                  allow_mass_stop=allow_mass_stop)
        except Exception:
            metrics.reconciled(time.monotonic() - started, "error")
            raise
        metrics.reconciled(time.monotonic() - started,
                           "changed" if applied.changed else "unchanged")
        return plan, applied

    async def _reconcile(self, *, trigger: str, allow_mass_stop: bool
                         ) -> tuple[plan_mod.Plan, supervisor.Applied]:
        assert self.parts is not None
        async with self._lock:
            snap = await asyncio.to_thread(self.read_snapshot, self._last_good())
            self.register_secrets(snap)
            expiry = snap.next_pause_expiry
            self.pause_due = None if expiry is None else (
                time.monotonic() + max(0.0, expiry - time.time()) + PAUSE_MARGIN)
            basis = plan_mod.Basis(
                device=self.cfg.device, daemon_running=True, daemon_pid=os.getpid(),
                generation=self.registry.generation, digest=snap.digest, commit=snap.commit,
                dirty=snap.dirty, problems=tuple(snap.problems),
                created_at=timestamps.utc_seconds(), root=self.cfg.root,
                error_files=tuple(snap.error_files))
            plan = plan_mod.make(
                snap.desired, supervisor.running_monitors(self.registry), basis,
                allow_mass_stop=allow_mass_stop or self.allow_mass_stop)
            self._log_problems(snap, plan, trigger)
            applied = await self.parts.supervisor.apply(plan)
            self.registry.held = [{"name": c.name, "action": c.action.value,
                                   "reason": plan.mass_stop or ""} for c in applied.held]
            self.registry.digest = snap.digest
            self.registry.commit, self.registry.dirty = snap.commit, snap.dirty
            self.registry.applied_at = timestamps.utc_seconds()
            try:
                await asyncio.to_thread(self._publish_if_changed)
            except OSError as e:
                raise direrrors.state_error(self.cfg.state_dir, e,
                                            doing="publish the running registry") from e
            self.last.at = self.registry.applied_at
            self.last.summary = plan.summary()
            self.last.trigger = trigger
            self.last.plan = plan
            if applied.changed or applied.failed:
                commit = f" at {snap.commit[:12]}" if snap.commit else ""
                log.info("reconciled (%s)%s: %s; generation %d", trigger or "request", commit,
                         applied_names(plan, applied), self.registry.generation)
            if applied.started and self.on_started is not None:
                self.on_started(list(applied.started))
            return plan, applied

    def _log_problems(self, snap: snapshot.Snapshot, plan: plan_mod.Plan, trigger: str) -> None:
        errors_now = snap.errors
        if errors_now != self.last.problems:
            for line in errors_now:
                log.error("%s", line)
            if self.last.problems and not errors_now:
                log.info("all monitor files are valid again")
            for change in plan.changes:
                if change.action.value == "keep":
                    log.warning("keep %s: file is invalid, its last applied version "
                                "keeps running", change.name)
            self.last.problems = errors_now
        elif errors_now and trigger == "resync":
            for line in errors_now:
                log.warning("still invalid: %s", line)
        if plan.mass_stop:
            log.warning("HELD %d stops (mass-stop guard): %s",
                        sum(1 for c in plan.changes if c.held), plan.mass_stop)

    def _publish_if_changed(self) -> bool:
        """Publish ``running.json`` unless its content (all but ``appliedAt``) equals what
        this daemon last published and the file is still that one (same inode, mtime,
        size). Returns whether it published.

        Raises:
            OSError: the state directory is not writable.
        """
        doc = self.registry.to_json()
        doc.pop("appliedAt", None)
        file = registry_mod.path(self.cfg.state_dir)
        if self._published is not None and self._published == (doc, snapshot.stat_key(file)):
            return False
        self._published = None
        registry_mod.publish(self.cfg.state_dir, self.registry)
        key = snapshot.stat_key(file)  # (None: deleted already; then publish again next time)
        self._published = (doc, key) if key is not None else None
        return True



def applied_names(plan: plan_mod.Plan, applied: supervisor.Applied) -> str:
    """``started a, b; replaced c; stopped d; failed e`` naming the monitors that changed
    (``renamed x -> y`` for a rename), for the daemon log."""
    started = set(applied.started)
    renames = {c.name: c.old_name for c in plan.changes if c.action.value == "rename"}
    replaced = {c.name for c in plan.changes if c.action.value == "replace"}
    parts: list[str] = []
    groups = (
        ("started", sorted(n for n in started if n not in replaced and n not in renames)),
        ("replaced", sorted(n for n in started if n in replaced)),
        ("renamed", sorted(f"{renames[n]} -> {n}" for n in started if n in renames)),
        ("updated", sorted(applied.updated)),
        ("stopped", sorted(applied.stopped)),
        ("failed", sorted(applied.failed)),
    )
    for verb, names in groups:
        if names:
            parts.append(f"{verb} {', '.join(names)}")
    return "; ".join(parts) or "nothing changed"
