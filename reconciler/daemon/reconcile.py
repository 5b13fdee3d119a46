"""One reconcile: snapshot -> plan -> supervisor -> ``running.json``; and crash recovery.

``Reconciler.reconcile`` reads the world (``snapshot.read``, in a worker thread),
plans against the running registry (``planning.plan.make``), lets the supervisor
apply the plan (stop first, then start), forgets the metrics series of the monitors
that left the layers (``daemon.metrics.forget``), and publishes ``running.json`` when
its content changed. Reconciles never overlap (a lock). File and config problems are
logged when they change; held stops at every pass until resolved.

``Reconciler.recover`` runs once at start, before the first reconcile: it sweeps what
a crash left in the state directory and settles fires left unfinished.

No signals, sockets or watching here (``daemon.main``), no control requests
(``daemon.operations``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler import errors, redaction, settings, snapshot, timestamps
from reconciler.daemon import metrics, supervisor
from reconciler.daemon import parts as parts_mod
from reconciler.model import Monitor, MonitorName
from reconciler.planning import desired as desired_mod
from reconciler.planning import plan as plan_mod
from reconciler.state import direrrors
from reconciler.state import registry as registry_mod

if TYPE_CHECKING:  # git mode only (``follow``): no git modules for a local repository
    from reconciler.daemon import gitmode

log = logging.getLogger("monitors.daemon")

PUBLISHING = "publish the running registry"
"""What a failed publish of ``running.json`` was doing (``direrrors.state_error``)."""
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
        publish: publish ``running.json`` after each reconcile that changed it; False
            for ``run --once``, whose daemon publishes it once, when it stops (views
            show a one-shot run as not running: no control socket answers).
    """

    def __init__(self, cfg: settings.Settings, registry: registry_mod.Registry, *,
                 redactor: redaction.Redactor, boot_good: Mapping[MonitorName, Monitor],
                 allow_mass_stop: bool = False,
                 on_started: Callable[[list[MonitorName]], None] | None = None,
                 publish: bool = True) -> None:
        self.cfg = cfg
        self.registry = registry
        self.redactor = redactor
        self.boot_good = dict(boot_good)
        self.allow_mass_stop = allow_mass_stop
        self.on_started = on_started
        self.publish = publish
        self.last = Last()
        self.parts: parts_mod.Parts | None = None  # set once built (``daemon.main``)
        self.pause_due: float | None = None  # monotonic time of the next pause expiry
        self._lock = asyncio.Lock()
        self._published: tuple[dict[str, Any], tuple[int, int, int] | None] | None = None
        self.git: gitmode.Tracker | None = None  # git mode: the followed ref (``follow``)
        self._shared_toml: Any = None  # the settings the parts were last configured with
        self._secrets_of: snapshot.Snapshot | None = None  # secrets registered for it
        self._plan_memo: tuple[tuple[Any, ...], plan_mod.Plan, snapshot.Snapshot] | None = None
        self._known: tuple[snapshot.Snapshot | None, frozenset[MonitorName],
                           frozenset[MonitorName]] = (None, frozenset(), frozenset())
        self._departed: frozenset[MonitorName] = frozenset()  # forgotten, a fire in flight

    def follow(self, applied: str | None = None) -> None:
        """Enter git mode when ``[git] ref`` is set in ``cfg`` (again after a SIGHUP),
        remembering ``applied`` (``running.json``'s last applied commit) or the
        revisions already known.

        Raises:
            errors.ConfigError: ``[git] fetch`` is not a duration.
        """
        git = None
        if self.cfg.section("git"):  # (without [git], no git module is imported)
            from reconciler.config import gitfollow

            git = gitfollow.git_settings(self.cfg)
        old = self.git
        self._shared_toml = None  # a SIGHUP reconfigured the parts from the local file
        if git is None:
            self.git = None
            return
        from reconciler.daemon import gitmode

        self.git = gitmode.Tracker(self.cfg, git,
                                   applied=old.revisions.applied if old else applied)
        if old is not None and old.revisions.ref == git.ref:
            self.git.revisions = old.revisions

    def read_snapshot(self, last_good: Mapping[MonitorName, Monitor], *,
                      with_git: bool = True) -> snapshot.Snapshot:
        """``snapshot.read`` with the auto-pauses of the state directory (a worker thread:
        both list and read files)."""
        return snapshot.read(self.cfg, last_good=last_good, autopaused=self._autopaused(),
                             completed=None if self.parts is None
                             else self.parts.store.completions(),
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
        (``actions.recovery``), each logged in one line. The layers are read for it
        only when a fire is unfinished (a clean start reads them once, to reconcile)."""
        from reconciler.actions import recovery
        from reconciler.state import leftovers

        assert self.parts is not None
        swept = await asyncio.to_thread(leftovers.sweep, self.cfg.state_dir)
        if swept.summary():
            log.info("%s", swept.summary())
        for line in swept.kept:
            log.warning("%s", line)
        unfinished = await asyncio.to_thread(self.parts.store.unfinished_fires)
        if not unfinished:
            return
        if self.git is not None:  # the working tree is not what runs: the last applied set
            monitors: dict[str, Monitor] = {str(n): m for n, m in self.boot_good.items()}
            self.redactor.add_all(redaction.collect(list(self.boot_good.values()),
                                                    self.cfg.toml, os.environ))
        else:
            snap = await asyncio.to_thread(self.read_snapshot, self.boot_good, with_git=False)
            self.register_secrets(snap)
            monitors = {str(n): m for n, m in snap.desired.monitors.items()}
        done = await recovery.recover(self.parts.store, monitors, self.parts.dispatcher,
                                      unfinished=unfinished)
        for item in done:
            log.info("recovered %s fire %s (%s): %s", item.monitor, item.event_id,
                     item.outcome, item.reason)

    async def reconcile(self, *, trigger: str = "", allow_mass_stop: bool = False,
                        fetch: bool = False) -> tuple[plan_mod.Plan, supervisor.Applied]:
        """Load the layers (git mode: of the followed commit, fetching first when
        ``fetch``), plan against the registry, apply, publish ``running.json`` (timed
        and counted in ``daemon.metrics``).

        Raises:
            errors.StateError: ``running.json`` cannot be published.
        """
        started = time.monotonic()
        try:
            plan, applied = await self._reconcile(trigger=trigger,
                                                  allow_mass_stop=allow_mass_stop, fetch=fetch)
        except Exception:
            metrics.reconciled(time.monotonic() - started, "error")
            raise
        metrics.reconciled(time.monotonic() - started,
                           "changed" if applied.changed else "unchanged")
        return plan, applied

    async def _reconcile(self, *, trigger: str, allow_mass_stop: bool, fetch: bool
                         ) -> tuple[plan_mod.Plan, supervisor.Applied]:
        assert self.parts is not None
        async with self._lock:
            if self.git is not None:
                snap = await asyncio.to_thread(self._git_snapshot, fetch)
            else:
                snap = await asyncio.to_thread(self.read_snapshot, self._last_good())
            if snap is None:  # git mode before any usable commit: nothing to apply
                return self._idle(trigger)
            if snap is not self._secrets_of:
                self.register_secrets(snap)
                self._secrets_of = snap
            expiry = snap.next_pause_expiry
            self.pause_due = None if expiry is None else (
                time.monotonic() + max(0.0, expiry - time.time()) + PAUSE_MARGIN)
            git = self.git.revisions.to_json() if self.git is not None else None
            allow = allow_mass_stop or self.allow_mass_stop
            # the same snapshot (git mode: an unchanged ref) and running set plan the same
            memo = (id(snap), self.registry.generation, tuple(self.registry.entries), allow,
                    tuple(sorted((git or {}).items())))
            same = self._plan_memo is not None and self._plan_memo[0] == memo \
                and self._plan_memo[2] is snap
            if same:
                assert self._plan_memo is not None
                plan = self._plan_memo[1]
            else:
                basis = plan_mod.Basis(
                    device=self.cfg.device, daemon_running=True, daemon_pid=os.getpid(),
                    generation=self.registry.generation, digest=snap.digest,
                    commit=snap.commit, dirty=snap.dirty, problems=tuple(snap.problems),
                    created_at=timestamps.utc_seconds(), root=self.cfg.root,
                    error_files=tuple(snap.error_files), git=git)
                plan = plan_mod.make(snap.desired, supervisor.running_monitors(self.registry),
                                     basis, allow_mass_stop=allow)
            self._log_problems(snap, plan, trigger)
            applied = await self.parts.supervisor.apply(plan)
            self._forget_departed(snap, applied)
            self.registry.held = [{"name": c.name, "action": c.action.value,
                                   "reason": plan.mass_stop or ""} for c in applied.held]
            self.registry.digest = snap.digest
            self.registry.commit, self.registry.dirty = snap.commit, snap.dirty
            self._record_revisions(snap, applied)
            self.registry.applied_at = timestamps.utc_seconds()
            quiet = same and not (applied.changed or applied.failed)
            self._plan_memo = None if applied.changed else (memo, plan, snap)
            try:
                if self.publish:
                    await asyncio.to_thread(self._publish_if_changed, quiet)
            except OSError as e:
                raise direrrors.state_error(self.cfg.state_dir, e,
                                            doing=PUBLISHING) from e
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

    def _forget_departed(self, snap: snapshot.Snapshot, applied: supervisor.Applied) -> None:
        """Forget the metrics series of the monitors that left this device's layers
        since the last reconcile (``Desired.known``; a held stop still runs; which
        stays: ``daemon.metrics``). Their stops are done: the evaluators' last counts
        are in. A fire in flight counts under its monitor's name when it ends, so
        departed names are forgotten again at each reconcile until none is in flight."""
        assert self.parts is not None
        held = frozenset(c.name for c in applied.held)
        last_snap, last_held, before = self._known
        known = before if snap is last_snap and held == last_held \
            else snap.desired.known() | held
        departed = (before - known) | (self._departed - known)
        self._known = (snap, held, known)
        if departed:
            metrics.forget(departed)
        self._departed = departed if self.parts.dispatcher.in_flight else frozenset()

    def _git_snapshot(self, fetch: bool) -> snapshot.Snapshot | None:
        """Git mode (worker thread): the snapshot of the commit to apply (cached while
        nothing changed), or None when no commit was ever usable."""
        assert self.git is not None
        target = self.git.target(fetch=fetch)
        if target is None:
            return None
        autopaused, last_good = self._autopaused(), self._last_good()
        completed = {} if self.parts is None else self.parts.store.completions()
        snap = self.git.cached(target, autopaused, last_good, completed)
        if snap is not None:
            return snap
        self._configure(target.settings)
        snap = snapshot.read(target.settings, last_good=last_good, autopaused=autopaused,
                             completed=completed, with_git=False)
        return self.git.remember(target, autopaused, last_good, completed, snap)

    def _configure(self, cfg: settings.Settings) -> None:
        """Give the dispatcher and sources the commit's shared settings (channels,
        agents, routines, fleet) when they changed, as a SIGHUP reload does."""
        if self.parts is None or cfg.toml == self._shared_toml:
            return
        from reconciler import fleet
        from reconciler.actions import options

        try:
            self.parts.dispatcher.reconfigure(options.parse(cfg.toml))
            # commands run and relative paths resolve in the daemon's root, not the export
            self.parts.ctx.settings = dataclasses.replace(cfg, root=self.cfg.root)
            self.parts.ctx.fleet = fleet.load(cfg.fleet_file)
        except errors.MonitorsError as e:  # snapshot.read reports it as settings_error
            log.debug("keeping the action settings in use: %s", e)
            return
        self._shared_toml = cfg.toml

    def _record_revisions(self, snap: snapshot.Snapshot, applied: supervisor.Applied) -> None:
        """Git mode: the applied commit, and per running monitor the commit its running
        version was applied from (kept for a monitor whose file is invalid now)."""
        reg = self.registry
        if self.git is None or snap.commit is None:
            reg.monitor_revisions = {}
            reg.git = None
            return
        self.git.revisions.applied = snap.commit
        for name in [*applied.started, *applied.updated]:
            reg.monitor_revisions[name] = snap.commit
        for name in list(reg.monitor_revisions):
            if name not in reg.entries:
                del reg.monitor_revisions[name]
        for name in reg.entries:
            reg.monitor_revisions.setdefault(name, snap.commit)
        reg.git = self.git.revisions.to_json()

    def _idle(self, trigger: str) -> tuple[plan_mod.Plan, supervisor.Applied]:
        """The no-op outcome of a git-mode reconcile with no usable commit yet."""
        assert self.git is not None
        self.registry.git = self.git.revisions.to_json()
        basis = plan_mod.Basis(device=self.cfg.device, daemon_running=True,
                               daemon_pid=os.getpid(), generation=self.registry.generation,
                               digest="", created_at=timestamps.utc_seconds(),
                               root=self.cfg.root)
        running = supervisor.running_monitors(self.registry)
        desired = desired_mod.Desired(monitors=dict(running), excluded={}, invalid={})
        plan = plan_mod.make(desired, running, basis)
        self.last.at, self.last.trigger = basis.created_at, trigger
        self.last.summary = f"no usable commit of {self.git.revisions.ref}: " \
            f"{self.git.revisions.error or 'unknown'}"
        return plan, supervisor.Applied()

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

    def _publish_if_changed(self, quiet: bool = False) -> bool:
        """Publish ``running.json`` unless its content (all but ``appliedAt``) equals what
        this daemon last published and the file is still that one (same inode, mtime,
        size). ``quiet``: the reconcile reused the last plan and changed nothing, so
        only the file is checked. Returns whether it published.

        Raises:
            OSError: the state directory is not writable.
        """
        file = registry_mod.path(self.cfg.state_dir)
        if quiet and self._published is not None \
                and self._published[1] == snapshot.stat_key(file):
            return False
        doc = self.registry.to_json()
        doc.pop("appliedAt", None)
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
