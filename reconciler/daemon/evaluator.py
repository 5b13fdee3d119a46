"""The evaluation engine: every running monitor's polls, one scheduler for all.

Each poll is: observe (``sources``) -> decide (``conditions``) -> persist
(``state.store``) -> dispatch (``events.Dispatcher``) -> heartbeat (liveness).
Promises:

* **One scheduler, spread out.** Polled monitors sit in one heap
  (``scheduler.Scheduler``). A monitor polls right after ``start`` and then every
  interval; a restarted one whose last check is less than an interval old (same
  fingerprint) first waits for the rest of it (``state.resume``). Monitors
  started in the same loop iteration (a daemon restart, a large
  apply) have their first polls offset by a deterministic fraction (a CRC-32 of the
  name) of a window sized for ``FIRST_POLL_RATE`` first polls per second, capped at
  the interval: one new monitor polls at once, a thousand spread over five seconds
  (``run --once`` polls every monitor at once: it waits for them, then exits).
* **A task only for a poll that waits.** A poll of a source type declaring ``EAGER``
  (``sources.registry``) starts on the scheduler's callback and becomes a task only
  if it waits (``daemon.eager``); an unchanged check reuses the last decision
  (``polls.remembered``); a monitor rescheduled one interval on queues in its
  interval's lane (``scheduler``). So an idle poll allocates no task, decision or
  heap entry.
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
  it was. Check errors never change the condition state, unless the monitor's
  ``condition.onError`` is ``observe`` (``conditions.outage``).
* **Cheap heartbeats.** Liveness is counted in memory and flushed every
  ``state.store.LIVENESS_FLUSH_INTERVAL`` seconds in a worker thread, one file for
  all monitors (``state.liveness``); durable writes always run in worker threads,
  never on the loop. The one exception to the coalescing: the first check of each
  started (or replaced) evaluator is written to its own ``liveness.json`` at once,
  before ``wait_first_poll`` reports it, so what ``apply`` reports and what
  ``list`` reads agree. First checks that come together share one worker-thread
  call that writes only their files (``_flush_first``). ``run --once`` turns it off
  (``first_check_files``): it exits right after its polls, and the flush at
  ``close`` writes every heartbeat, so ``list`` reads the same.
* **Refusals are explicit.** A future-version state record or a permanent source error
  parks the monitor: it stays in ``running()`` with its reason in ``parked``; it is not
  polled.
* **Push sources are not scheduled.** A ``ws`` source is a stream; a ``webhook``
  monitor waits for ``push`` (the receiver, ``daemon.deliveries``).
* A monitor auto-paused by the rate-limit guard (``Store.autopause``) is not polled.
* A self-ending monitor (``until``/``stopAfter``/``stopWhen``) that completes is parked
  with ``completed (reason)``, recorded in ``lifecycle.json``, and parked at once when
  started again under the same key (``conditions.lifecycle``).
* **Secrets are redacted first.** Every observation and check error is redacted
  with the shared ``ctx.redactor`` before the condition sees it, so no signature,
  state, event, liveness error or view holds a registered secret.

This module starts, stops and schedules monitors (``Engine``); one poll is
``daemon.pipeline`` (``Engine``'s base class); the values and pure helpers of a poll
are ``daemon.polls``; ``monitors test``'s dry run is ``daemon.dryrun``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from reconciler import errors, events
from reconciler.daemon import clock as clock_mod
from reconciler.daemon import eager, metrics
from reconciler.daemon import scheduler as scheduler_mod
from reconciler.daemon.pipeline import Pipeline
from reconciler.daemon.polls import Entry, FirstPoll, PollResult, Stats, load_state, offset_fraction
from reconciler.model import Monitor, MonitorName
from reconciler.sources import push
from reconciler.sources import registry as source_types

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext
from reconciler.state import records
from reconciler.state import resume as resume_mod
from reconciler.state import store as store_mod

log = logging.getLogger("monitors.engine")

FIRST_POLL_RATE = 200.0
"""First polls per second the start-up spread aims at."""


class Engine(Pipeline):
    """Runs monitors: see the module docstring.

    Args:
        store: the state store.
        dispatcher: carries out actions (called after the fire is durable).
        ctx: the shared source context (HTTP client, in-flight cap, fleet, settings).
        guard: rate-limit and drought hooks, optional.
        clock: due times and intervals (``monotonic``), timestamps in state and events
            (``time``), the liveness flush's sleep; ``daemon.clock.REAL`` by default.
        flush_interval: seconds between liveness flushes.
        resume: a restarted monitor whose last check is less than an interval old
            waits for the rest of it (``state.resume``); off for ``run --once``.
        first_poll_rate: first polls per second the start-up spread aims at
            (``FIRST_POLL_RATE``); None: every started monitor polls at once.
        first_check_files: write a started monitor's own liveness.json right after
            its first check (module docstring); off for ``run --once``.
    """

    def __init__(self, store: store_mod.Store, dispatcher: events.Dispatcher, *,
                 ctx: SourceContext, guard: events.Guard | None = None,
                 clock: clock_mod.Clock = clock_mod.REAL,
                 flush_interval: float = store_mod.LIVENESS_FLUSH_INTERVAL,
                 first_poll_rate: float | None = FIRST_POLL_RATE,
                 resume: bool = True, first_check_files: bool = True) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.ctx = ctx
        self.guard = guard
        self.clock = clock
        self.flush_interval = flush_interval
        self.first_poll_rate = first_poll_rate
        self.stats = Stats()
        self._entries: dict[MonitorName, Entry] = {}
        self._scheduler: scheduler_mod.Scheduler[MonitorName] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._first_pending = 0
        self._starting: list[Entry] = []
        self._batch: asyncio.Handle | None = None
        self._closed = False
        self._first_flush: asyncio.Future[None] | None = None
        self.resume = resume
        self.first_check_files = first_check_files
        self._first_names: list[MonitorName] = []

    # -- public API -----------------------------------------------------------

    def running(self) -> dict[MonitorName, Monitor]:
        """Every started monitor (parked ones included), by name."""
        return {name: e.monitor for name, e in self._entries.items()}

    @property
    def parked(self) -> dict[MonitorName, str]:
        """Started monitors that are not evaluated, with the reason (future-version
        state, permanent source error, completed)."""
        return {n: e.parked for n, e in self._entries.items() if e.parked is not None}

    @property
    def skipped(self) -> dict[MonitorName, int]:
        """Ticks skipped per monitor because its previous poll was still running
        (or the engine was late by whole intervals)."""
        return {n: e.skipped for n, e in self._entries.items()}

    async def start(self, monitor: Monitor) -> None:
        """Start evaluating ``monitor`` (a running one of that name is stopped first).

        Never raises for what a user can cause: a future-version or unreadable state
        record parks the monitor (see ``parked``) and its first poll
        reports the reason.
        """
        if monitor.name in self._entries:
            await self.stop(monitor.name)
        self._ensure_started()
        loop = asyncio.get_running_loop()
        entry = Entry(monitor, loop.create_future())
        self._entries[monitor.name] = entry
        try:
            entry.previous = await self._load_state(monitor)
        except errors.StateError as e:
            self._park(entry, str(e))
            log.warning("%s: not run: %s", monitor.name, e)
            return
        if monitor.lifecycle is not None and await self._begin_life(entry):
            return  # completed under its current fingerprint and end conditions
        if source_types.is_stream(monitor):
            entry.stream = loop.create_task(self._run_stream(entry),
                                            name=f"monitor:{monitor.name}")
            return
        if source_types.is_pushed(monitor):  # evaluated by ``push`` when a delivery comes
            self._first_done(entry, FirstPoll(True))
            return
        self._starting.append(entry)
        if self._batch is None:
            self._batch = loop.call_soon(self._schedule_starting)

    async def stop(self, name: MonitorName | str) -> None:
        """Stop evaluating ``name``: a poll still observing is cancelled, one already
        persisting or dispatching is let finish. No-op when not running."""
        await self._stop(name, forget=True)

    async def _stop(self, name: MonitorName | str, *, forget: bool) -> None:
        """``stop``; ``forget``: drop the store's in-memory caches of ``name`` (not
        when the whole engine closes: its closing flush writes them as they are)."""
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
        if entry.monitor.owners and self.owners is not None:
            await self.owners.release(entry.monitor.name)  # a listed device takes it now
        self._first_done(entry, None)
        if forget:
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
            if source_types.is_pushed(monitor):
                return PollResult(monitor.name, error=push.nothing_to_poll(monitor))
            while entry.busy:
                await asyncio.sleep(0.01)
            if entry.parked:
                return PollResult(monitor.name, error=entry.parked)
        else:
            loop = asyncio.get_running_loop()
            entry = Entry(monitor, loop.create_future())
            if source_types.is_pushed(monitor):
                return PollResult(monitor.name, error=push.nothing_to_poll(monitor))
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
        await asyncio.to_thread(self.store.flush_files, [monitor.name])
        return result

    async def close(self) -> None:
        """Stop every monitor, then flush liveness. The source context stays open
        (its owner closes it)."""
        self._closed = True
        await asyncio.gather(*(self._stop(n, forget=False) for n in list(self._entries)))
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
        self._loop = asyncio.get_running_loop()
        if self._scheduler is None:
            self._scheduler = scheduler_mod.Scheduler(self._on_due, clock=self.clock)
        if self._flusher is None and self.flush_interval > 0:
            self._flusher = asyncio.get_running_loop().create_task(
                self._flush_loop(), name="monitors:liveness-flush")

    async def _flush_loop(self) -> None:
        """Flush liveness every ``flush_interval``: the aggregate file is encoded here on
        the loop a slice at a time (polls run between slices; encoding in a worker
        thread held the GIL and the store's lock for tens of milliseconds at 10,000
        monitors), then written, with the few monitors whose error line changed, in
        a worker thread."""
        while True:
            await self.clock.sleep(self.flush_interval)
            try:
                batch = self.store.flush_begin()
                if batch is None:
                    continue
                while self.store.flush_encode(batch):
                    await asyncio.sleep(0)
                await asyncio.to_thread(self.store.flush_finish, batch)
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
        that first polls still pending arrive at about ``first_poll_rate`` per second
        (capped at the interval): one started monitor polls at once, a thousand
        started together spread over five seconds (no window without a rate).
        """
        self._batch = None
        batch, self._starting = self._starting, []
        batch = [e for e in batch if self._entries.get(e.monitor.name) is e and not e.parked]
        if not batch or self._scheduler is None:
            return
        batch = [e for e in batch if not self._resume(e)]
        pending = self._first_pending + len(batch)
        rate = self.first_poll_rate
        now = self.clock.monotonic()
        for entry in batch:
            entry.counted = True
            self._first_pending += 1
            window = min(entry.interval, pending / rate) if rate else 0.0
            self._scheduler.schedule(entry.monitor.name,
                                     now + offset_fraction(entry.monitor.name) * window)

    def _resume(self, entry: Entry) -> bool:
        """Schedule a restarted monitor's first poll after the rest of its interval
        (``state.resume``) and report its last check as its first poll; False when it
        must poll now (overdue, never checked, a new identity, ``resume`` off)."""
        monitor = entry.monitor
        previous = entry.previous
        if (not self.resume or self._scheduler is None or previous is None
                or previous.get("fingerprint") != monitor.fingerprint):
            return False
        last, error = self.store.last_check(monitor.name)
        delay = resume_mod.first_poll_delay(last, monitor.source.interval or 0.0,
                                        self.clock.time(), offset_fraction(monitor.name))
        if delay is None:
            return False
        self._scheduler.schedule(monitor.name, self.clock.monotonic() + delay)
        if not entry.first.done():
            entry.first.set_result(FirstPoll(error is None, error))
        log.info("%s: schedule kept: next poll in %.1fs (last check %.1fs ago)",
                 monitor.name, delay, self.clock.time() - (last or 0.0))
        return True

    def _on_due(self, name: MonitorName, due: float) -> None:
        """Scheduler callback: start a poll unless one is running; schedule the next."""
        entry = self._entries.get(name)
        scheduler, loop = self._scheduler, self._loop
        if (entry is None or entry.parked is not None or self._closed or scheduler is None
                or loop is None):
            return
        now = self.clock.monotonic()
        interval = entry.interval
        next_due = due + interval
        stats = self.stats
        if next_due <= now:
            missed = int((now - due) // interval)
            entry.skipped += missed
            stats.skipped += missed
            stats.missed += missed
            next_due = due + (missed + 1) * interval
        scheduler.schedule(name, next_due, interval)  # one interval on: its lane
        if entry.busy:
            entry.skipped += 1
            stats.skipped += 1
            return
        if self.store.autopaused(name):
            return
        late = now - due
        stats.polls += 1
        stats.lateness.append(late)
        metrics.poll_started(late)
        entry.busy = True
        if entry.eager and not entry.monitor.owners:  # owners: admission speaks httpx
            entry.task = eager.start(self._poll_task(entry), loop=loop)
        else:
            entry.task = loop.create_task(self._poll_task(entry))

    async def _poll_task(self, entry: Entry) -> None:
        try:
            await self._poll(entry)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not kill the scheduler or other monitors
            log.exception("%s: poll failed unexpectedly", entry.monitor.name)
        finally:
            entry.busy = False

