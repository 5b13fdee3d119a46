"""The evaluation engine: every running monitor's polls, one scheduler for all.

Each poll is: observe (``sources``) -> decide (``conditions``) -> persist
(``state.store``) -> dispatch (``events.Dispatcher``) -> heartbeat (liveness).
Promises:

* **One scheduler, spread out.** Polled monitors sit in one heap
  (``scheduler.Scheduler``). A monitor polls right after ``start`` and then every
  interval. Monitors started in the same loop iteration (a daemon restart, a large
  apply) have their first polls offset by a deterministic fraction (a CRC-32 of the
  name) of a window sized for ``FIRST_POLL_RATE`` first polls per second, capped at
  the interval: one new monitor polls at once, a thousand spread over five seconds.
* **Never two polls of one monitor at once.** A tick that comes while the previous
  poll still runs is skipped and counted (``skipped``); a slow or failing source
  delays only its own monitor. Every source enforces its own ``timeout``. HTTP
  polls in flight are capped by the source context; ``command`` sources are
  streams, one task each.
* **Persist before dispatch.** On a fire, the ``pending`` fire record (carrying
  the new condition state) is written durably first, then ``state.json``; only
  then is the dispatcher called. The fire record is the commit point: after a
  crash between the two writes, ``start`` rolls ``state.json`` forward from it.
  If a write fails, the fire record is removed and the stored state is exactly as
  it was. Check errors never change the condition state.
* **Cheap heartbeats.** Liveness is counted in memory and flushed every
  ``state.store.LIVENESS_FLUSH_INTERVAL`` seconds in a worker thread; durable
  writes always run in worker threads, never on the loop. The one exception to
  the coalescing: the first check of each started (or replaced) evaluator is
  flushed at once, before ``wait_first_poll`` reports it, so what ``apply``
  reports and what ``list`` reads from ``liveness.json`` agree. First checks that
  come together share one flush (``_flush_first``).
* **Refusals are explicit.** A future-version state record, a push source (ws,
  webhook: validated but not evaluated yet) or a permanent source error parks the
  monitor: it stays in ``running()`` with its reason in ``parked``; it is not polled.
* A monitor auto-paused by the rate-limit guard (``Store.autopause``) is not polled.
* **Secrets are redacted first.** Every observation and check error is redacted
  with the shared ``ctx.redactor`` before the condition sees it, so no signature,
  state, event, liveness error or view holds a registered secret.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import logging
import re
import secrets
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from reconciler import conditions, errors, events, sources
from reconciler.daemon import scheduler as scheduler_mod
from reconciler.model import Monitor, MonitorName, Observation
from reconciler.sources import command, push
from reconciler.sources import registry as source_types

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext
from reconciler.state import records
from reconciler.state import store as store_mod

log = logging.getLogger("monitors.engine")

FIRST_POLL_RATE = 200.0
"""First polls per second the start-up spread aims at."""

LATENESS_SAMPLES = 100_000
FLUSH_CHUNK = 128
"""Liveness files written per worker-thread call during a flush."""
FLUSH_PAUSE = 0.005
"""Seconds between flush chunks (the loop runs polls in between)."""


@dataclass(frozen=True, slots=True)
class FirstPoll:
    """How a monitor's first check went: ``ok`` (an observation) or the check error."""

    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PollResult:
    """One evaluation by ``Engine.poll_once``.

    Attributes:
        monitor: the monitor's name.
        observation: what the source saw (None on a check error or a skip).
        decision: the condition's decision (None on a check error or a skip).
        event: the fired event (None when nothing fired).
        error: the check error's one line, or the reason the poll was skipped.
    """

    monitor: MonitorName
    observation: Observation | None = None
    decision: conditions.Decision | None = None
    event: events.Event | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the source produced an observation."""
        return self.error is None


def new_event_id(at: float) -> str:
    """A sortable fire id: ``<UTC yyyymmddTHHMMSS.ffffff>-<8 hex>`` (``events.Event``)."""
    stamp = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y%m%dT%H%M%S.%f")
    return f"{stamp}-{secrets.token_hex(4)}"


def make_event(monitor: Monitor, decision: conditions.Decision, observation: Observation,
               *, at: float, event_id: str | None = None) -> events.Event:
    """The event for a firing decision (observation excerpt capped at
    ``events.EXCERPT_CHARS`` characters)."""
    return events.Event(
        id=event_id or new_event_id(at),
        monitor=monitor.name,
        fingerprint=monitor.fingerprint,
        fired_at=store_mod.iso(at),
        summary=decision.summary,
        signature=decision.signature,
        observation=decision.observation[: events.EXCERPT_CHARS],
        meta=dict(observation.meta),
        groups=decision.groups,
        reason=str(decision.reason),
    )


def load_state(store: store_mod.Store,
               monitor: Monitor) -> tuple[records.StateRecord | None, bool]:
    """The monitor's condition state, rolled forward from a newer committed fire.

    A fire record is written (durably, with the state it commits) before
    ``state.json``; when the newest fire record is newer than ``state.json``'s
    ``lastEventId``, the process died between the two writes and the fire's state
    is the current one.

    Returns:
        (state or None, True when rolled forward and not yet written).

    Raises:
        errors.StateError: a future-version or unreadable record.
    """
    name = monitor.name
    previous = store.read_state(name)
    ids = store.fire_ids(name)
    last = (previous or {}).get("lastEventId") or ""
    if not ids or ids[0] <= last:
        return previous, False
    fire = store.read_fire(name, ids[0]) or {}
    state = fire.get("state")
    if not isinstance(state, dict) or fire.get("version", 0) > records.FIRE_VERSION:
        return previous, False
    return cast(records.StateRecord, dict(state)), True


def offset_fraction(name: str) -> float:
    """A deterministic fraction in [0, 1) from the monitor's name (CRC-32)."""
    return zlib.crc32(name.encode()) / 2**32


@dataclass(eq=False)
class _Entry:
    monitor: Monitor
    first: asyncio.Future[FirstPoll | None]
    previous: Mapping[str, Any] | None = None
    busy: bool = False
    task: asyncio.Task[None] | None = None
    commit: asyncio.Future[Any] | None = None
    counted: bool = False
    stream: asyncio.Task[None] | None = None
    skipped: int = 0
    polls: int = 0
    parked: str | None = None


@dataclass
class Stats:
    """Counters for benchmarks and ``status``: polls started, ticks skipped, and the
    lateness (seconds after the scheduled time) of recent polls."""

    polls: int = 0
    skipped: int = 0
    missed: int = 0
    fires: int = 0
    lateness: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=LATENESS_SAMPLES)
    )


class Engine:
    """Runs monitors: see the module docstring.

    Args:
        store: the state store.
        dispatcher: carries out actions (called after the fire is durable).
        ctx: the shared source context (HTTP client, in-flight cap, fleet, settings).
        guard: rate-limit and drought hooks, optional.
        clock: wall clock in Unix seconds (timestamps in state and events).
        flush_interval: seconds between liveness flushes.
    """

    def __init__(self, store: store_mod.Store, dispatcher: events.Dispatcher, *,
                 ctx: SourceContext, guard: events.Guard | None = None,
                 clock: Callable[[], float] = time.time,
                 flush_interval: float = store_mod.LIVENESS_FLUSH_INTERVAL) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.ctx = ctx
        self.guard = guard
        self.clock = clock
        self.flush_interval = flush_interval
        self.stats = Stats()
        self._entries: dict[MonitorName, _Entry] = {}
        self._scheduler: scheduler_mod.Scheduler[MonitorName] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._first_pending = 0
        self._starting: list[_Entry] = []
        self._batch: asyncio.Handle | None = None
        self._closed = False
        self._first_flush: asyncio.Future[None] | None = None

    # -- public API -----------------------------------------------------------

    def running(self) -> dict[MonitorName, Monitor]:
        """Every started monitor (parked ones included), by name."""
        return {name: e.monitor for name, e in self._entries.items()}

    @property
    def parked(self) -> dict[MonitorName, str]:
        """Started monitors that are not evaluated, with the reason (future-version
        state, push source not evaluated yet, permanent source error)."""
        return {n: e.parked for n, e in self._entries.items() if e.parked is not None}

    @property
    def skipped(self) -> dict[MonitorName, int]:
        """Ticks skipped per monitor because its previous poll was still running
        (or the engine was late by whole intervals)."""
        return {n: e.skipped for n, e in self._entries.items()}

    async def start(self, monitor: Monitor) -> None:
        """Start evaluating ``monitor`` (a running one of that name is stopped first).

        Never raises for what a user can cause: a future-version or unreadable state
        record or a push source parks the monitor (see ``parked``) and its first poll
        reports the reason.
        """
        if monitor.name in self._entries:
            await self.stop(monitor.name)
        self._ensure_started()
        loop = asyncio.get_running_loop()
        entry = _Entry(monitor, loop.create_future())
        self._entries[monitor.name] = entry
        if monitor.source_type in source_types.NOT_EVALUATED:
            self._park(entry, push.not_evaluated(monitor))
            log.info("%s: %s", monitor.name, entry.parked)
            return
        try:
            entry.previous = await self._load_state(monitor)
        except errors.StateError as e:
            self._park(entry, str(e))
            log.warning("%s: not run: %s", monitor.name, e)
            return
        if source_types.is_stream(monitor):
            entry.stream = loop.create_task(self._run_stream(entry),
                                            name=f"monitor:{monitor.name}")
            return
        self._starting.append(entry)
        if self._batch is None:
            self._batch = loop.call_soon(self._schedule_starting)

    async def stop(self, name: MonitorName | str) -> None:
        """Stop evaluating ``name``: a poll still observing is cancelled, one already
        persisting or dispatching is let finish. No-op when not running."""
        entry = self._entries.pop(MonitorName(name), None)
        if entry is None:
            return
        if self._scheduler is not None:
            self._scheduler.cancel(entry.monitor.name)
        for task in (entry.task, entry.stream):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if entry.commit is not None and not entry.commit.done():
            with contextlib.suppress(Exception):
                await entry.commit
        self._first_done(entry, None)
        await asyncio.to_thread(self.store.forget, entry.monitor.name)

    async def replace(self, monitor: Monitor) -> None:
        """Stop then start ``monitor`` (a new fingerprint starts a new baseline:
        ``conditions.decide`` ignores state stored under another fingerprint)."""
        await self.stop(monitor.name)
        await self.start(monitor)

    async def update(self, monitor: Monitor) -> None:
        """Swap in non-identity fields (rate limit, labels, placement, description)
        in place; the schedule and the baseline are kept. Starts it when not running."""
        entry = self._entries.get(monitor.name)
        if entry is None:
            await self.start(monitor)
        elif entry.monitor.fingerprint != monitor.fingerprint:
            await self.replace(monitor)
        else:
            entry.monitor = monitor

    async def wait_first_poll(self, names: Iterable[str], timeout: float
                              ) -> dict[str, FirstPoll | None]:
        """Wait up to ``timeout`` seconds for the first check of each of ``names``.

        Returns:
            name -> ``FirstPoll`` when it happened (or the monitor is parked), None
            when it did not happen in time or the monitor is not running.
        """
        futures: dict[str, asyncio.Future[FirstPoll | None]] = {}
        for name in names:
            entry = self._entries.get(MonitorName(name))
            if entry is not None:
                futures[name] = entry.first
        pending = [f for f in futures.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        out: dict[str, FirstPoll | None] = {}
        for name in names:
            fut = futures.get(name)
            out[name] = fut.result() if fut is not None and fut.done() else None
        return out

    async def poll_once(self, monitor: Monitor) -> PollResult:
        """Evaluate ``monitor`` once now (``run --once``, ``evaluate-now``): observe,
        decide, persist, dispatch, heartbeat. Uses the running evaluator's state when
        ``monitor`` is running (waiting for an in-flight poll first)."""
        self._ensure_started()
        entry = self._entries.get(monitor.name)
        if entry is not None and entry.monitor.fingerprint == monitor.fingerprint:
            while entry.busy:
                await asyncio.sleep(0.01)
            if entry.parked:
                return PollResult(monitor.name, error=entry.parked)
        else:
            loop = asyncio.get_running_loop()
            entry = _Entry(monitor, loop.create_future())
            if monitor.source_type in source_types.NOT_EVALUATED:
                return PollResult(monitor.name, error=push.not_evaluated(monitor))
            try:
                entry.previous = await self._load_state(monitor)
            except errors.StateError as e:
                return PollResult(monitor.name, error=str(e))
        if self.store.autopause(monitor.name) is not None:
            return PollResult(monitor.name, error="auto-paused (rate limit); not polled")
        entry.busy = True
        try:
            result = await self._poll(entry)
        finally:
            entry.busy = False
        await asyncio.to_thread(self.store.flush)
        return result

    async def close(self) -> None:
        """Stop every monitor, then flush liveness. The source context stays open
        (its owner closes it)."""
        self._closed = True
        await asyncio.gather(*(self.stop(n) for n in list(self._entries)))
        if self._scheduler is not None:
            self._scheduler.close()
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        await asyncio.to_thread(self.store.flush)

    # -- internals ------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._scheduler is None:
            self._scheduler = scheduler_mod.Scheduler(self._on_due)
        if self._flusher is None and self.flush_interval > 0:
            self._flusher = asyncio.get_running_loop().create_task(
                self._flush_loop(), name="monitors:liveness-flush")

    async def _flush_loop(self) -> None:
        """Flush liveness every ``flush_interval`` in chunks of ``FLUSH_CHUNK`` files,
        pausing between chunks, so a large flush never holds the loop up for long."""
        while True:
            await asyncio.sleep(self.flush_interval)
            try:
                while self.store.pending_liveness():
                    await asyncio.to_thread(self.store.flush, FLUSH_CHUNK)
                    await asyncio.sleep(FLUSH_PAUSE)
            except Exception:  # never let a flush failure stop heartbeats
                log.exception("liveness flush failed")

    async def _load_state(self, monitor: Monitor) -> records.StateRecord | None:
        """``load_state``, writing a rolled-forward ``state.json`` durably.

        Raises:
            errors.StateError: a future-version or unreadable record.
        """
        state, rolled = load_state(self.store, monitor)
        if rolled and state is not None and not self.store.readonly:
            log.warning("%s: state.json rolled forward from fire %s (interrupted commit)",
                        monitor.name, state.get("lastEventId"))
            await asyncio.to_thread(self.store.write_state, monitor.name, state)
        return state

    def _schedule_starting(self) -> None:
        """Schedule the first polls of every monitor started in this loop iteration.

        Each first poll is offset by ``offset_fraction(name)`` of a window sized so
        that first polls still pending arrive at about ``FIRST_POLL_RATE`` per second
        (capped at the interval): one started monitor polls at once, a thousand
        started together spread over five seconds.
        """
        self._batch = None
        batch, self._starting = self._starting, []
        batch = [e for e in batch if self._entries.get(e.monitor.name) is e and not e.parked]
        if not batch or self._scheduler is None:
            return
        pending = self._first_pending + len(batch)
        now = asyncio.get_running_loop().time()
        for entry in batch:
            entry.counted = True
            self._first_pending += 1
            window = min(entry.monitor.source.interval or 0.0, pending / FIRST_POLL_RATE)
            self._scheduler.schedule(entry.monitor.name,
                                     now + offset_fraction(entry.monitor.name) * window)

    def _park(self, entry: _Entry, reason: str) -> None:
        entry.parked = reason
        if self._scheduler is not None:
            self._scheduler.cancel(entry.monitor.name)
        self._first_done(entry, FirstPoll(False, reason))

    def _first_done(self, entry: _Entry, result: FirstPoll | None) -> None:
        if not entry.first.done():
            entry.first.set_result(result)
            if (result is not None and entry.parked is None) or entry.polls:
                self._first_pending = max(0, self._first_pending - 1)

    def _on_due(self, name: MonitorName, due: float) -> None:
        """Scheduler callback: start a poll unless one is running; schedule the next."""
        entry = self._entries.get(name)
        if entry is None or entry.parked is not None or self._closed or self._scheduler is None:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        interval = entry.monitor.source.interval
        assert interval is not None  # only polled sources are scheduled
        next_due = due + interval
        if next_due <= now:
            missed = int((now - due) // interval)
            entry.skipped += missed
            self.stats.skipped += missed
            self.stats.missed += missed
            next_due = due + (missed + 1) * interval
        self._scheduler.schedule(name, next_due)
        if entry.busy:
            entry.skipped += 1
            self.stats.skipped += 1
            return
        if self.store.autopause(name) is not None:
            return
        self.stats.polls += 1
        self.stats.lateness.append(now - due)
        entry.busy = True
        entry.task = loop.create_task(self._poll_task(entry))

    async def _poll_task(self, entry: _Entry) -> None:
        try:
            await self._poll(entry)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not kill the scheduler or other monitors
            log.exception("%s: poll failed unexpectedly", entry.monitor.name)
        finally:
            entry.busy = False

    async def _poll(self, entry: _Entry) -> PollResult:
        monitor = entry.monitor
        try:
            # Every source enforces its own ``timeout`` (no second timer per poll here).
            observation = await source_types.observe(monitor, self.ctx)
        except errors.SourceError as e:
            return await self._check_failed(entry, e)
        except Exception as e:  # a bug in a source: count it, keep running
            log.exception("%s: source raised", monitor.name)
            return await self._check_failed(entry, errors.SourceError(
                f"{type(e).__name__}: {e}", kind="internal"))
        return await self._evaluate(entry, observation)

    async def _flush_first(self, entry: _Entry) -> None:
        """Write liveness now when this was the first check of a started evaluator.

        Requests made in the same loop iteration share one flush (worker thread); a
        request made while a flush runs starts the next one, so the check it made
        is always in a flush that starts after it."""
        if entry.polls != 1 or self._entries.get(entry.monitor.name) is not entry:
            return
        if self._first_flush is None:
            self._first_flush = asyncio.ensure_future(self._run_first_flush())
        with contextlib.suppress(Exception):
            await asyncio.shield(self._first_flush)

    async def _run_first_flush(self) -> None:
        await asyncio.sleep(0)  # let the first checks of this loop iteration join
        self._first_flush = None  # later requests start the next flush
        try:
            await asyncio.to_thread(self.store.flush)
        except Exception:  # the periodic flush retries; never fail a poll over it
            log.exception("liveness flush after a first check failed")

    async def _check_failed(self, entry: _Entry, error: errors.SourceError) -> PollResult:
        name = entry.monitor.name
        message = self.ctx.redactor.redact(str(error))
        entry.polls += 1
        self.store.record_check(name, ok=False, error=message, at=self.clock())
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
        return PollResult(name, error=message)

    async def _evaluate(self, entry: _Entry, observation: Observation) -> PollResult:
        """Decide; when something must be stored, persist and dispatch in a task that a
        stop cannot cancel half-way (``asyncio.shield``); else just heartbeat.
        The observation is redacted first: signatures, state, events and views never
        hold a registered secret."""
        monitor = entry.monitor
        at = self.clock()
        observation = self.ctx.redactor.observation(observation)
        try:
            decision = conditions.decide(monitor, observation, entry.previous)
        except re.error as e:
            return await self._check_failed(entry, errors.SourceError(
                f"condition regex does not compile: {e}", kind="config", permanent=True))
        event: events.Event | None = None
        if decision.fire:
            event = make_event(monitor, decision, observation, at=at)
            if self.guard is not None and not self.guard.allow_fire(monitor, event):
                log.warning("%s: fire suppressed by the rate limit", monitor.name)
                event = None
        if decision.persist or event is not None:
            commit = asyncio.ensure_future(
                self._persist(entry, observation, decision, event, at))
            entry.commit = commit
            return await asyncio.shield(commit)
        return await self._checked(entry, observation, decision, None, at)

    async def _persist(self, entry: _Entry, observation: Observation,
                       decision: conditions.Decision, event: events.Event | None,
                       at: float) -> PollResult:
        """Durable writes (worker thread), then heartbeat and dispatch."""
        state = {**decision.state, "updatedAt": store_mod.iso(at)}
        if event is not None:
            state.update(lastEventId=event.id, lastFiredAt=event.fired_at)
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
        return await self._checked(entry, observation, decision, event, at)

    async def _checked(self, entry: _Entry, observation: Observation,
                       decision: conditions.Decision, event: events.Event | None,
                       at: float) -> PollResult:
        """A good check: heartbeat, first poll, guard, then the dispatch."""
        monitor = entry.monitor
        entry.polls += 1
        self.store.record_check(monitor.name, ok=True, error=None, at=at)
        await self._flush_first(entry)
        if entry.counted or not entry.first.done():
            self._first_done(entry, FirstPoll(True))
        if self.guard is not None:
            try:
                await self.guard.after_check(monitor, ok=True, error=None)
            except Exception:
                log.exception("%s: guard.after_check failed", monitor.name)
        if event is not None:
            self.stats.fires += 1
            try:
                await self.dispatcher.dispatch(monitor, event)
            except Exception:  # the Dispatcher contract says never; keep running anyway
                log.exception("%s: dispatcher raised for %s", monitor.name, event.id)
        return PollResult(monitor.name, observation, decision, event)

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

    async def _run_stream(self, entry: _Entry) -> None:
        """Consume a ``command`` stream: each line is evaluated in turn."""
        monitor = entry.monitor
        stream = command.stream(monitor, self.ctx)
        try:
            async for item in stream:
                if isinstance(item, sources.Started):
                    self._first_done(entry, FirstPoll(True))
                    continue
                if isinstance(item, errors.SourceError):
                    await self._check_failed(entry, item)
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


@dataclass(frozen=True, slots=True)
class DryRun:
    """``monitors test``: one evaluation against the stored state, nothing written.

    Attributes:
        monitor: the monitor.
        observation: what the source saw (None on a check error).
        decision: the decision against the stored state (None on a check error).
        event: the event a fire would send (built even when it would not fire).
        previous: the stored condition state it was judged against.
        error: the check error's one line, or why the monitor would not run.
        paused: the auto-pause reason when auto-paused (it would not be polled).
    """

    monitor: Monitor
    observation: Observation | None = None
    decision: conditions.Decision | None = None
    event: events.Event | None = None
    previous: Mapping[str, Any] | None = None
    error: str | None = None
    paused: str | None = None


async def dry_run(monitor: Monitor, *, store: store_mod.Store, ctx: SourceContext,
                  clock: Callable[[], float] = time.time) -> DryRun:
    """Observe ``monitor`` once and decide against its stored state, writing nothing
    (``store`` should be read-only and ``ctx.dry_run`` set). Never raises for check
    errors: they come back in ``error``. Observation and error are redacted with
    ``ctx.redactor``, as the engine does.

    Raises:
        errors.StateError: the stored state cannot be read (future version, I/O).
    """
    previous, _ = load_state(store, monitor)
    pause = store.autopause(monitor.name)
    paused = str(pause.get("reason") or "rate limit") if pause else None
    if monitor.source_type in source_types.NOT_EVALUATED:
        return DryRun(monitor, previous=previous, error=push.not_evaluated(monitor),
                      paused=paused)
    try:
        observation = ctx.redactor.observation(await source_types.observe(monitor, ctx))
    except errors.SourceError as e:
        return DryRun(monitor, previous=previous, error=ctx.redactor.redact(str(e)),
                      paused=paused)
    try:
        decision = conditions.decide(monitor, observation, previous)
    except re.error as e:
        return DryRun(monitor, observation, previous=previous,
                      error=f"config: condition regex does not compile: {e}", paused=paused)
    event = make_event(monitor, decision, observation, at=clock())
    return DryRun(monitor, observation, decision, event, previous, paused=paused)

