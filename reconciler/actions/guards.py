"""The ``events.Guard``: the firehose rate limit and the drought alarm.

Rate limit: more than ``rateLimit.max`` fires within ``rateLimit.per`` seconds
auto-pauses the monitor in running state (``Store.set_autopause``: durable, so
it holds across daemon restarts; never the repository), refuses the fire, and
notifies the owner once. ``clear(name)`` (used by ``resume``) lifts it.

Drought: ``THRESHOLD`` (5) consecutive failed checks, or 5 consecutive failed
fires, notify the owner once that the monitor is doing nothing; the first good
check (or fire) then sends one recovery notice and clears the streak, which may
escalate again later. Whether the owner has been told is kept in
``<state>/monitors/<name>/drought.json`` through the store (``Store.drought``,
``Store.set_drought``: versioned, a corrupt file moved aside; written only when that
changes), so a restart neither repeats the alarm nor loses the recovery notice.

Owner notifications go through the owner's default channels (``[owner]
channels``) via ``OwnerNotifier`` (the dispatcher).
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from reconciler import durations, errors, timestamps
from reconciler.actions.records import FireStore
from reconciler.events import Event
from reconciler.model import Monitor

if TYPE_CHECKING:
    from reconciler import events
    from reconciler.actions.dispatch import Dispatcher, FireGuard
    from reconciler.state.store import Store

LOG = logging.getLogger("monitors.guards")
THRESHOLD = 5
CHECKS = "checks"
FIRES = "fires"


class OwnerNotifier(Protocol):
    """Sends a message to the owner's default channels without blocking (``Dispatcher``)."""

    def notify_owner(self, monitor: str, message: str) -> Any:
        """Queue ``message`` about ``monitor`` for the owner."""
        ...


class Guards:
    """Rate limit and drought for every monitor of one daemon (implements ``events.Guard``).

    Args:
        store: the state store (auto-pause records, monitor directories).
        owner: where owner notifications go (the dispatcher).
        threshold: consecutive failures before the drought alarm (default 5).
        clock: monotonic seconds (injectable for tests).
        wall: Unix seconds (to place fires recorded before a restart in the window).

    Attributes:
        on_autopause: called with the monitor's name right after a rate-limit breach
            auto-paused it (on the event loop; the daemon triggers a reconcile so the
            monitor's evaluator stops at once). None: nothing is called.
    """

    def __init__(self, store: FireStore, owner: OwnerNotifier, *, threshold: int = THRESHOLD,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.store = store
        self.owner = owner
        self.threshold = threshold
        self.clock = clock
        self.wall = wall
        self._fires: dict[str, collections.deque[float]] = {}
        self._streaks: dict[tuple[str, str], int] = collections.defaultdict(int)
        self._drought: dict[str, dict[str, Any]] = {}
        self.on_autopause: Callable[[str], None] | None = None

    # -- rate limit --------------------------------------------------------------

    def is_paused(self, name: str) -> bool:
        """True when ``name`` is auto-paused (the store caches the record; one source of
        truth, so a pause cleared through the store is seen here too)."""
        return bool(self.store.autopause(name))

    def allow_fire(self, monitor: Monitor, event: Event) -> bool:
        """Count this fire; return False (and auto-pause, notifying the owner once) when it
        would be fire number ``max + 1`` within ``per`` seconds, or when already paused."""
        name = str(monitor.name)
        if self.is_paused(name):
            return False
        limit = monitor.rate_limit
        if limit is None:
            return True
        now = self.clock()
        window = self._fires.get(name)
        if window is None:
            window = self._fires[name] = self._seed(name, limit.max, now)
        while window and window[0] <= now - limit.per:
            window.popleft()
        if len(window) + 1 > limit.max:
            reason = (f"rate limit: more than {limit.max} fires within "
                      f"{durations.format(limit.per)}; auto-paused (monitors resume {name})")
            self.store.set_autopause(name, reason, timestamps.utc_micro())
            window.clear()
            LOG.warning("%s: %s", name, reason)
            self.owner.notify_owner(name, reason)
            if self.on_autopause is not None:
                try:
                    self.on_autopause(name)
                except Exception:
                    LOG.exception("%s: on_autopause hook failed", name)
            return False
        window.append(now)
        return True

    def _seed(self, name: str, count: int, now: float) -> collections.deque[float]:
        """The window after a restart: the last ``count`` fires from the store, mapped
        onto ``clock`` (so restarting the daemon does not reset the rate limit)."""
        window: collections.deque[float] = collections.deque()
        try:
            records = self.store.fires(name, limit=count)
        except Exception:  # an unreadable history must not stop the fire
            LOG.exception("%s: cannot read fire history for the rate limit", name)
            return window
        wall = self.wall()
        for record in reversed(records):
            created = record.get("createdAt") if isinstance(record, dict) else None
            try:
                at = dt.datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
            window.append(now - max(0.0, wall - at))
        return window

    def clear(self, name: str) -> bool:
        """Lift the auto-pause of ``name`` (for ``resume``); return True if it was paused."""
        was = self.is_paused(name)
        if was:
            self.store.clear_autopause(name)
        self._fires[name] = collections.deque()  # a fresh window: resume means fire again
        return was

    # -- drought -----------------------------------------------------------------

    async def after_check(self, monitor: Monitor, *, ok: bool, error: str | None) -> None:
        """Count the streak of failed checks (``error`` is the check error, if any)."""
        if ok:  # every quiet poll: no drought of checks open, nothing to load or write
            name = str(monitor.name)
            state = self._drought.get(name)
            if state is not None and not state.get(CHECKS):
                self._streaks[(name, CHECKS)] = 0
                return
        await self._observe(monitor, CHECKS, ok=ok, reason=error or "")

    async def after_fire(self, monitor: Monitor, *, ok: bool, reason: str) -> None:
        """Count the streak of failed fires (called by the dispatcher when a fire ends)."""
        await self._observe(monitor, FIRES, ok=ok, reason=reason)

    async def _observe(self, monitor: Monitor, kind: str, *, ok: bool, reason: str) -> None:
        name = str(monitor.name)
        key = (name, kind)
        state = await self._load(name)
        if ok:
            self._streaks[key] = 0
            if state.get(kind):
                state.pop(kind)
                await self._save(name, state)
                what = "checks" if kind == CHECKS else "fires"
                self.owner.notify_owner(name, f"recovered: {what} succeed again")
            return
        self._streaks[key] += 1
        if self._streaks[key] >= self.threshold and not state.get(kind):
            state[kind] = {"since": timestamps.utc_micro(), "count": self._streaks[key]}
            await self._save(name, state)
            what = "checks" if kind == CHECKS else "fires"
            detail = f": last error: {reason}" if reason else ""
            self.owner.notify_owner(
                name,
                f"drought: {self._streaks[key]} consecutive failed {what}; the monitor is "
                f"doing nothing{detail}",
            )

    async def _load(self, name: str) -> dict[str, Any]:
        if name not in self._drought:
            # Read on the loop, once per monitor, as the engine reads state.json at start:
            # a small file, most often absent; a worker-thread hop per monitor cost more
            # than the read (a burst of first checks: run --once).
            try:  # a corrupt file is moved aside and reported by the store
                self._drought[name] = dict(self.store.drought(name))
            except errors.StateError as e:
                LOG.warning("%s: ignoring unreadable drought record: %s", name, e)
                self._drought[name] = {}
        return self._drought[name]

    async def _save(self, name: str, state: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self.store.set_drought, name, checks=state.get(CHECKS),
                                    fires=state.get(FIRES))
        except (OSError, errors.StateError) as e:  # one line (the store logs when all
            # writes start failing; a newer-version file is kept, never overwritten)
            LOG.warning("%s: cannot write the drought record: %s", name,
                        getattr(e, "strerror", None) or e)


def build(store: FireStore, dispatcher: Any, **kwargs: Any) -> Guards:
    """Guards notifying through ``dispatcher`` (a ``dispatch.Dispatcher``), attached to it
    so it reports each fire's end (drought of failed fires)."""
    guards = Guards(store, dispatcher, **kwargs)
    dispatcher.attach_guard(guards)
    return guards


if TYPE_CHECKING:  # mypy proves the seams: the real parts satisfy the protocols

    def _conforms(
        d: Dispatcher, g: Guards, s: Store
    ) -> tuple[events.Dispatcher, events.Guard, FireStore, OwnerNotifier, FireGuard]:
        return d, g, s, d, g
