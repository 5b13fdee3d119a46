"""The supervisor: the only part that acts on a plan (STYLE.md: plan pure, supervisor acts).

Order (Kopf's task orchestration): **stop first, then start**. All stops (removed,
paused, owned elsewhere, and the old name of a rename) are awaited before any
replace, start or update, so a replaced or renamed monitor never runs twice at
once. A rename moves the old name's state to the new name (``store.rename``)
between the stop and the start, so the baseline is carried over. Held changes
(mass-stop guard) are skipped. One monitor failing to start is logged and
recorded and never holds back the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.model import Monitor, MonitorName
from reconciler.planning.diff import Change, ChangeKind
from reconciler.planning.plan import Plan
from reconciler.state import registry as registry_mod

log = logging.getLogger("monitors.daemon")


class EngineLike(Protocol):
    """The part of ``daemon.evaluator.Engine`` the supervisor drives."""

    async def start(self, monitor: Monitor) -> None: ...

    async def stop(self, name: MonitorName) -> None: ...

    async def replace(self, monitor: Monitor) -> None: ...

    async def update(self, monitor: Monitor) -> None: ...


class StoreLike(Protocol):
    """The part of ``state.store.Store`` the supervisor uses."""

    def rename(self, old: MonitorName, new: MonitorName) -> Any: ...


@dataclass(slots=True)
class Applied:
    """What one ``apply`` did.

    Attributes:
        started: names whose evaluator was started (start, replace, rename): these get a
            first poll to wait for.
        stopped, updated: names stopped / updated in place.
        failed: name -> error for changes that could not be carried out.
        held: changes skipped by the mass-stop guard.
    """

    started: list[MonitorName] = field(default_factory=list)
    stopped: list[MonitorName] = field(default_factory=list)
    updated: list[MonitorName] = field(default_factory=list)
    failed: dict[MonitorName, str] = field(default_factory=dict)
    held: list[Change] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when anything was started, stopped or updated."""
        return bool(self.started or self.stopped or self.updated)


def _describe(change: Change) -> str:
    fields = "; ".join(f"{f.path}: {_short(f.old)} -> {_short(f.new)}" for f in change.fields)
    if change.action is ChangeKind.RENAME:
        head = f"rename {change.old_name} -> {change.name}: {change.reason}"
    else:
        head = f"{change.action.value} {change.name}: {change.reason}"
    return head + (f" ({fields})" if fields else "")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Supervisor:
    """Applies plans to an engine and keeps the running registry in step.

    Args:
        engine: the evaluator engine (``daemon.evaluator.Engine``).
        store: the state store (for ``rename``).
        registry: the running registry to update (published by the caller).
        now: returns the current ISO-8601 UTC time (injected for tests).
    """

    def __init__(self, engine: EngineLike, store: StoreLike, registry: registry_mod.Registry,
                 *, now: Any) -> None:
        self.engine = engine
        self.store = store
        self.registry = registry
        self._now = now

    async def apply(self, plan: Plan) -> Applied:
        """Carry out ``plan``: stops, then renames/replaces/starts, then updates.

        Bumps ``registry.generation`` once when anything changed. Never raises for
        one monitor's failure (recorded in ``Applied.failed`` and logged).
        """
        done = Applied()
        todo = [c for c in plan.changes if c.changing]
        done.held = [c for c in todo if c.held]
        todo = [c for c in todo if not c.held]
        if not todo:
            return done
        generation = self.registry.generation + 1
        now = self._now()
        entries = self.registry.entries
        # 1. stop first: plain stops and the old name of every rename.
        for change in todo:
            if change.action is ChangeKind.STOP:
                await self._guarded(done, change, self.engine.stop(change.name))
                entries.pop(change.name, None)
                done.stopped.append(change.name)
                log.info("%s", _describe(change))
            elif change.action is ChangeKind.RENAME and change.old_name is not None:
                await self._guarded(done, change, self.engine.stop(change.old_name))
                entries.pop(change.old_name, None)
        # 2. then start: renames (state carried over), replaces, starts.
        for change in todo:
            monitor = change.monitor
            if monitor is None or change.action in (ChangeKind.STOP, ChangeKind.UPDATE):
                continue
            if change.action is ChangeKind.RENAME and change.old_name is not None:
                try:
                    await asyncio.to_thread(self.store.rename, change.old_name, change.name)
                except Exception as e:  # a failed move must not stop the start
                    log.warning("rename %s -> %s: state not carried over: %s",
                                change.old_name, change.name, e)
                ok = await self._guarded(done, change, self.engine.start(monitor))
            elif change.action is ChangeKind.REPLACE:
                ok = await self._guarded(done, change, self.engine.replace(monitor))
            else:
                ok = await self._guarded(done, change, self.engine.start(monitor))
            if ok:
                entries[change.name] = registry_mod.Entry(monitor, generation, now)
                done.started.append(change.name)
                log.info("%s", _describe(change))
        # 3. updates in place (baseline kept).
        for change in todo:
            if change.action is not ChangeKind.UPDATE or change.monitor is None:
                continue
            if await self._guarded(done, change, self.engine.update(change.monitor)):
                old = entries.get(change.name)
                entries[change.name] = registry_mod.Entry(
                    change.monitor, generation, old.started_at if old else now)
                done.updated.append(change.name)
                log.info("%s", _describe(change))
        if done.changed:
            self.registry.generation = generation
        return done

    async def _guarded(self, done: Applied, change: Change, call: Any) -> bool:
        try:
            await call
        except Exception as e:  # one monitor's failure never holds back the others
            done.failed[change.name] = f"{type(e).__name__}: {e}"
            log.error("%s %s failed: %s", change.action.value, change.name, e)
            return False
        return True


def running_monitors(reg: registry_mod.Registry) -> Mapping[MonitorName, Monitor]:
    """name -> applied monitor of every registry entry."""
    return {name: entry.monitor for name, entry in reg.entries.items()}
