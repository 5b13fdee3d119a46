"""The values of one poll and the pure helpers around it (no asyncio tasks, no scheduling).

``FirstPoll`` and ``PollResult`` are what the engine reports; ``make_event`` builds
the event of a firing decision; ``load_state`` rolls ``state.json`` forward from a
newer committed fire record; ``offset_fraction`` spreads first polls; ``Entry`` is
one running monitor's bookkeeping in ``evaluator.Engine``; ``Stats`` its counters.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import secrets
import zlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from reconciler import conditions, events
from reconciler.conditions import diff
from reconciler.model import Monitor, MonitorName, Observation
from reconciler.sources import registry as source_types
from reconciler.state import records
from reconciler.state import store as store_mod

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

LATENESS_SAMPLES = 100_000
"""Recent poll lateness samples kept in ``Stats.lateness``."""


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
        kind="resolved" if decision.reason is conditions.Reason.RESOLVED else "fired",
        previous=None if decision.previous is None
        else decision.previous[: events.EXCERPT_CHARS],
        diff=diff.unified(decision.previous, decision.observation[: events.EXCERPT_CHARS]),
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


MEMO_CHARS = 4096
"""Observations up to this many characters have their unchanged decision remembered
(``Entry.unchanged``); a longer one is decided afresh each time (holding it between
polls would cost memory; deciding it costs little next to reading it)."""


def remembered(entry: Entry, text: str) -> conditions.Decision | None:
    """The decision of ``entry``'s previous check when this check is bound to repeat it:
    the same monitor (fingerprint, condition), the same stored state and the same text.
    ``conditions.decide`` is pure (a function of those three alone), so it would return
    an equal decision; a quiet monitor's poll skips it. None when it must decide."""
    memo = entry.unchanged
    if (memo is not None and memo[0] is entry.monitor and memo[1] is entry.previous
            and memo[2] == text):
        return memo[3]
    return None


def remember(entry: Entry, text: str, decision: conditions.Decision) -> None:
    """Keep ``decision`` for ``remembered`` when it changes nothing (no fire, nothing to
    store) and ``text`` is short (``MEMO_CHARS``); else forget the last one."""
    if decision.fire or decision.persist or len(text) > MEMO_CHARS:
        entry.unchanged = None
    else:
        entry.unchanged = (entry.monitor, entry.previous, text, decision)


def offset_fraction(name: str) -> float:
    """A deterministic fraction in [0, 1) from the monitor's name (CRC-32)."""
    return zlib.crc32(name.encode()) / 2**32


@dataclass(eq=False, slots=True)
class Entry:
    """One running monitor in the engine: its future first poll, state and counters."""

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
    interval: float = field(init=False)
    """Seconds between polls (``source.interval``, part of the fingerprint, so it never
    changes for an entry; 0.0 for a stream or push source, which is not scheduled)."""
    eager: bool = field(init=False)
    """Its source type needs no task until it waits (``sources.registry.is_eager``;
    the type is part of the fingerprint too): polls start as ``daemon.eager`` does."""

    def __post_init__(self) -> None:
        self.interval = self.monitor.source.interval or 0.0
        self.eager = source_types.is_eager(self.monitor)
    pushing: asyncio.Lock = field(default_factory=asyncio.Lock)
    link: tuple[str, str | None] | None = None
    """A connection stream's state (``ws``): ``("connected", None)`` or
    ``("reconnecting", last error)``; None for other monitors."""
    token: int | None = None  # an owners monitor's fencing token for this poll
    observe: Callable[[Monitor, SourceContext], Awaitable[Observation]] | None = None
    """Its source type's ``observe`` (``sources.registry.observer``), looked up at its
    first poll (the type is part of the fingerprint)."""
    unchanged: tuple[Monitor, Mapping[str, Any] | None, str, conditions.Decision] | None = None
    """The last decision that neither fired nor stored anything, with the monitor, stored
    state and text it was made for (``remembered``)."""


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

