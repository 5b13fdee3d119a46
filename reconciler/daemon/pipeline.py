"""One poll of one monitor: observe -> decide -> persist -> dispatch -> heartbeat.

Also what is pushed rather than polled: ``push`` evaluates a webhook delivery's
observation the same way, and ``_run_stream`` each item of a stream (``command``,
``ws``); ``links`` is the state of connection streams.

``Pipeline`` is the half of ``evaluator.Engine`` that runs a poll once it is due
(the other half starts, stops and schedules monitors). Its promises are the
engine's (see ``daemon.evaluator``): persist before dispatch (the fire record is the
commit point, a failed write leaves the stored state as it was), check errors never
change the condition state unless ``condition.onError`` is ``observe`` (then the
error is the observation ``conditions.outage`` makes of it, and still counts as a
failed check for liveness and drought), a permanent source error parks the monitor, every
observation and error is redacted before the condition sees it, and the first
check of a started evaluator is flushed to ``liveness.json`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler import conditions, errors, events, sources
from reconciler.conditions import lifecycle, outage
from reconciler.daemon import clock as clock_mod
from reconciler.daemon import metrics
from reconciler.daemon.polls import (
    Entry,
    FirstPoll,
    PollResult,
    Stats,
    make_event,
    remember,
    remembered,
)
from reconciler.model import MonitorName, Observation
from reconciler.sources import registry as source_types
from reconciler.state import store as store_mod

if TYPE_CHECKING:
    from reconciler.daemon import leases
    from reconciler.sources.context import SourceContext

log = logging.getLogger("monitors.engine")


class Pipeline:
    """Runs polls for ``evaluator.Engine`` (its base class; see the module docstring)."""

    store: store_mod.Store
    dispatcher: events.Dispatcher
    ctx: SourceContext
    guard: events.Guard | None
    clock: clock_mod.Clock
    stats: Stats
    _entries: dict[MonitorName, Entry]
    _first_pending: int
    _first_flush: asyncio.Future[None] | None
    _first_names: list[MonitorName]
    _scheduler: Any
    first_check_files: bool
    owners: leases.Owners | None = None  # failover owners' leases (``[etcd]``), or None

    @property
    def links(self) -> dict[MonitorName, dict[str, str | None]]:
        """Connection streams (``ws``) by name: ``{"state": "connected"|"reconnecting",
        "error": the last error (redacted) or None}``."""
        return {n: {"state": e.link[0], "error": e.link[1]}
                for n, e in self._entries.items() if e.link is not None}

    async def push(self, name: MonitorName | str, item: Observation | errors.SourceError
                   ) -> PollResult | None:
        """Evaluate ``item``, pushed to the running monitor ``name`` (a webhook delivery):
        decide, persist, dispatch, heartbeat, as a poll would; a ``SourceError`` is a
        check error (``condition.onError`` decides). Pushes to one monitor are evaluated
        one at a time, in order.

        Returns:
            the result, or None when ``name`` is not running, parked or auto-paused.
        """
        entry = self._entries.get(MonitorName(name))
        if entry is None or entry.parked is not None:
            return None
        async with entry.pushing:
            if self._entries.get(entry.monitor.name) is not entry or entry.parked:
                return None
            if self.store.autopaused(entry.monitor.name):
                return None
            self.stats.polls += 1
            entry.busy = True
            try:
                if isinstance(item, errors.SourceError):
                    return await self._failed(entry, item)
                commit = asyncio.ensure_future(self._evaluate(entry, item))
                entry.commit = commit
                return await asyncio.shield(commit)
            finally:
                entry.busy = False

    def _park(self, entry: Entry, reason: str) -> None:
        entry.parked = reason
        if self._scheduler is not None:
            self._scheduler.cancel(entry.monitor.name)
        self._first_done(entry, FirstPoll(False, reason))

    def _first_done(self, entry: Entry, result: FirstPoll | None) -> None:
        if not entry.first.done():
            entry.first.set_result(result)
            if (result is not None and entry.parked is None) or entry.polls:
                self._first_pending = max(0, self._first_pending - 1)

    async def _poll(self, entry: Entry) -> PollResult:
        monitor = entry.monitor
        if monitor.owners and not await self._admitted(entry):
            return PollResult(monitor.name, error="standby")
        started = self.clock.monotonic()
        try:
            # Every source enforces its own ``timeout`` (no second timer per poll here).
            observe = entry.observe
            if observe is None:
                observe = entry.observe = source_types.observer(monitor)
            observation = await observe(monitor, self.ctx)
        except errors.SourceError as e:
            metrics.polled(monitor.name, monitor.source.TYPE, self.clock.monotonic() - started)
            return await self._failed(entry, e)
        except Exception as e:  # a bug in a source: count it, keep running
            log.exception("%s: source raised", monitor.name)
            return await self._check_failed(entry, errors.SourceError(
                f"{type(e).__name__}: {e}", kind="internal"))
        metrics.polled(monitor.name, monitor.source.TYPE, self.clock.monotonic() - started)
        return await self._evaluate(entry, observation)

    async def _flush_first(self, entry: Entry) -> None:
        """Write the monitor's own liveness.json now when this was the first check of
        a started evaluator (unless ``first_check_files`` is off: ``run --once``).

        Requests made in the same loop iteration share one worker-thread call that
        writes only their files; a request made while one runs starts the next, so
        the check it made is always in a write that starts after it."""
        if (entry.polls != 1 or not self.first_check_files
                or self._entries.get(entry.monitor.name) is not entry):
            return
        self._first_names.append(entry.monitor.name)
        if self._first_flush is None:
            self._first_flush = asyncio.ensure_future(self._run_first_flush())
        with contextlib.suppress(Exception):
            await asyncio.shield(self._first_flush)

    async def _run_first_flush(self) -> None:
        await asyncio.sleep(0)  # let the first checks of this loop iteration join
        self._first_flush = None  # later requests start the next flush
        names, self._first_names = self._first_names, []
        try:
            await asyncio.to_thread(self.store.flush_files, names)
        except Exception:  # the periodic flush retries; never fail a poll over it
            log.exception("liveness flush after a first check failed")

    async def _failed(self, entry: Entry, error: errors.SourceError) -> PollResult:
        """A source's check error: evaluated as an observation when the monitor's
        ``onError`` says so (``conditions.outage``), else a plain check error."""
        observation = outage.observation(
            source_types.on_error(entry.monitor), error.kind,
            str(error.args[0]) if error.args else "", permanent=error.permanent)
        if observation is None:
            return await self._check_failed(entry, error)
        metrics.check_failed(entry.monitor.name, error.kind)  # observed, still a failed check
        return await self._evaluate(entry, observation,
                                    error=self.ctx.redactor.redact(str(error)))

    async def _begin_life(self, entry: Entry) -> bool:
        """At start: record a self-ending monitor's first start (``state.lifecycle``), or
        park it when it completed under its current key. True when parked."""
        monitor = entry.monitor
        record = await asyncio.to_thread(self.store.begin_lifecycle, monitor.name,
                                         lifecycle.key(monitor), self.clock.time())
        done = record.get("completed")
        if done:
            self._park(entry, f"completed ({done.get('reason')})")
            log.info("%s: not started: %s", monitor.name, entry.parked)
        return bool(done)

    async def _life_after(self, entry: Entry, text: str | None, fired: bool) -> None:
        """After a check of a self-ending monitor: count a fire, then complete it (record,
        park: it stops polling) when ``conditions.lifecycle.outcome`` says so."""
        monitor, spec = entry.monitor, entry.monitor.lifecycle
        assert spec is not None
        record = (await asyncio.to_thread(self.store.count_lifecycle_fire, monitor.name)
                  if fired else self.store.lifecycle(monitor.name))
        if record is None or record.get("completed"):
            return
        at = self.clock.time()
        reason = lifecycle.outcome(spec, lifecycle.Progress(float(record.get("startedAt") or at),
                                                            int(record.get("fires") or 0)),
                                   now=at, observation=text)
        if reason is None:
            return
        try:
            await asyncio.to_thread(self.store.complete, monitor.name, reason, at)
        except (OSError, errors.StateError) as e:
            log.warning("%s: cannot record its completion: %s", monitor.name, e)
        self._park(entry, f"completed ({reason})")
        log.info("%s: completed (%s); it polls no more", monitor.name, reason)

    async def _check_failed(self, entry: Entry, error: errors.SourceError) -> PollResult:
        name = entry.monitor.name
        message = self.ctx.redactor.redact(str(error))
        entry.polls += 1
        metrics.check_failed(name, error.kind)
        self.store.record_check(name, ok=False, error=message, at=self.clock.time())
        await self._flush_first(entry)
        self._first_done(entry, FirstPoll(False, message))
        if error.permanent:
            self._park(entry, message)
            log.warning("%s: parked: %s", name, message)
        if self.guard is not None:
            try:
                await self.guard.after_check(entry.monitor, ok=False, error=message)
            except Exception:
                log.exception("%s: guard.after_check failed", name)
        if entry.monitor.lifecycle is not None and entry.parked is None:
            await self._life_after(entry, None, False)
        return PollResult(name, error=message)

    async def _evaluate(self, entry: Entry, observation: Observation,
                        error: str | None = None) -> PollResult:
        """Decide; when something must be stored, persist and dispatch in a task that a
        stop cannot cancel half-way (``asyncio.shield``); else just heartbeat.
        The observation is redacted first: signatures, state, events and views never
        hold a registered secret. ``error`` (redacted): the check error an error
        observation stands for (the check counts as failed)."""
        monitor = entry.monitor
        at = self.clock.time()
        observation = self.ctx.redactor.observation(observation)
        text = observation.text
        decision = remembered(entry, text)
        if decision is None:
            try:
                decision = conditions.decide(monitor, observation, entry.previous)
            except re.error as e:
                return await self._check_failed(entry, errors.SourceError(
                    f"condition regex does not compile: {e}", kind="config", permanent=True))
            remember(entry, text, decision)
        event: events.Event | None = None
        if decision.fire:
            event = make_event(monitor, decision, observation, at=at)
            if self.guard is not None and not self.guard.allow_fire(monitor, event):
                log.warning("%s: fire suppressed by the rate limit", monitor.name)
                event = None
        if decision.persist or event is not None:
            commit = asyncio.ensure_future(
                self._persist(entry, observation, decision, event, at, error))
            entry.commit = commit
            return await asyncio.shield(commit)
        return await self._checked(entry, observation, decision, None, at, error)

    async def _persist(self, entry: Entry, observation: Observation,
                       decision: conditions.Decision, event: events.Event | None,
                       at: float, error: str | None = None) -> PollResult:
        """Durable writes (worker thread), then heartbeat and dispatch."""
        state = {**decision.state, "updatedAt": store_mod.iso(at)}
        if event is not None:
            state.update(lastEventId=event.id, lastFiredAt=event.fired_at)
        if entry.monitor.owners:
            event = await self._fenced(entry, state, event)
            if entry.token is None:
                return PollResult(entry.monitor.name, error="fenced: not fired")
        try:
            await asyncio.to_thread(self._commit, entry.monitor.name, state, event, at)
        except errors.StateError as e:
            # A newer-version state.json appeared meanwhile (kept untouched), or the
            # store went read-only (state directory lost): park, never overwrite.
            self._park(entry, str(e))
            log.warning("%s: not run: %s", entry.monitor.name, e)
            return PollResult(entry.monitor.name, error=str(e))
        except OSError as e:
            return await self._check_failed(entry, errors.SourceError(
                f"cannot write state: {e.strerror or e}", kind="state"))
        entry.previous = state
        return await self._checked(entry, observation, decision, event, at, error)

    async def _checked(self, entry: Entry, observation: Observation,
                       decision: conditions.Decision, event: events.Event | None,
                       at: float, error: str | None = None) -> PollResult:
        """A decided check: heartbeat, first poll, guard, then the dispatch. ``error``:
        the check failed (an error observation): liveness and drought count it so."""
        monitor = entry.monitor
        ok = error is None
        entry.polls += 1
        self.store.record_check(monitor.name, ok=ok, error=error, at=at)
        if entry.polls == 1:
            await self._flush_first(entry)
        if not entry.first.done():
            self._first_done(entry, FirstPoll(ok, error))
        if self.guard is not None:
            try:
                await self.guard.after_check(monitor, ok=ok, error=error)
            except Exception:
                log.exception("%s: guard.after_check failed", monitor.name)
        if event is not None:
            self.stats.fires += 1
            try:
                await self.dispatcher.dispatch(monitor, event)
            except Exception:  # the Dispatcher contract says never; keep running anyway
                log.exception("%s: dispatcher raised for %s", monitor.name, event.id)
        if monitor.lifecycle is not None:
            await self._life_after(entry, observation.text, event is not None)
        return PollResult(monitor.name, observation, decision, event, error)

    async def _admitted(self, entry: Entry) -> bool:
        """Before polling an ``owners:`` monitor: does this device hold its etcd key?
        When it has just taken it, continue from the state stored in etcd. A standby
        resolves its first poll (there is nothing to wait for)."""
        entry.token = None
        if self.owners is None:
            admission = None
        else:
            admission = await self.owners.admit(entry.monitor.name)
        if admission is None or not admission.run:
            self._first_done(entry, FirstPoll(True))
            return False
        entry.token = admission.token
        if admission.state is not None:
            entry.previous = dict(admission.state)
        return True

    async def _fenced(self, entry: Entry, state: Mapping[str, Any],
                      event: events.Event | None) -> events.Event | None:
        """The fencing check of an ``owners:`` monitor, with the state written to etcd
        in the same transaction (``leases.Owners.commit``). Returns the event carrying
        the token; on refusal ``entry.token`` is None, nothing is stored or fired."""
        from reconciler.daemon import leases

        token, owners = entry.token, self.owners
        try:
            if owners is None or token is None:
                raise leases.Fenced("not fired: no fencing token")
            await owners.commit(entry.monitor.name, state, token=token)
        except leases.Fenced as e:
            entry.token = None
            metrics.fenced(entry.monitor.name)
            log.warning("%s: %s", entry.monitor.name, e)
            return None
        return None if event is None else dataclasses.replace(event, fencing_token=token)

    def _commit(self, name: str, state: Mapping[str, Any], event: events.Event | None,
                at: float) -> None:
        """Durable writes of one decision (worker thread): fire record, then state."""
        if event is None:
            self.store.write_state(name, state)
            return
        self.store.create_fire(name, event, state=state, at=at)
        try:
            self.store.write_state(name, state)
        except BaseException:
            self.store.delete_fire(name, event.id)
            raise

    async def _run_stream(self, entry: Entry) -> None:
        """Consume a stream (``command``, ``ws``): each item is evaluated in turn."""
        monitor = entry.monitor
        stream = source_types.stream(monitor, self.ctx)
        if monitor.source_type in source_types.LINKS:
            entry.link = ("connecting", None)
        try:
            async for item in stream:
                if isinstance(item, sources.Started | sources.Connected):
                    if isinstance(item, sources.Connected):
                        entry.link = ("connected", None)
                    self._first_done(entry, FirstPoll(True))
                    continue
                if isinstance(item, errors.SourceError):
                    if entry.link is not None:
                        entry.link = ("reconnecting", self.ctx.redactor.redact(str(item)))
                    await self._failed(entry, item)
                    if entry.parked:
                        return
                    continue
                if self.store.autopause(monitor.name) is not None:
                    continue
                self.stats.polls += 1
                entry.busy = True
                try:
                    commit = asyncio.ensure_future(self._evaluate(entry, item))
                    entry.commit = commit
                    await asyncio.shield(commit)
                finally:
                    entry.busy = False
                if entry.parked:
                    return
        finally:
            await stream.aclose()

