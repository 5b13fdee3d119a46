"""Crash recovery: what happens to fires found unfinished when the daemon starts.

A fire is unfinished when its record is ``pending`` (durable before dispatch,
so a crash may fall between the two) or ``dispatched`` (the action had started).
The guarantee per action type (each type module's ``RECOVERY``, read through
``actions.registry``):

=============  ===============  ================================================
action         guarantee        unfinished fire at start
=============  ===============  ================================================
webhook-out    at-least-once    re-sent with the same event id (the receiver
                                dedupes on ``Idempotency-Key``)
notify         at-least-once    re-sent (a message may arrive twice)
run            at-most-once     marked ``interrupted``; never re-spawned
routine        at-most-once     marked ``interrupted``; never re-spawned
=============  ===============  ================================================

A fire whose monitor is no longer configured here, or whose fingerprint differs
from the monitor's current one (its action was edited since), is marked
``interrupted`` and not re-sent: the new action never receives the old event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from reconciler import timestamps
from reconciler.actions import registry
from reconciler.actions.common import Recovery
from reconciler.actions.records import (
    FireStatus,
    FireStore,
    record_to_event,
    status_of,
)
from reconciler.events import Event
from reconciler.model import Monitor

if TYPE_CHECKING:
    from reconciler.state.records import FireRecord


class Redeliverer(Protocol):
    """What recovery needs from the dispatcher (``dispatch.Dispatcher``)."""

    async def redeliver(self, monitor: Monitor, event: Event) -> None:
        """Re-send ``event`` of ``monitor`` (same id), detached."""
        ...


@dataclass(frozen=True, slots=True)
class Recovered:
    """One unfinished fire and what recovery did with it.

    Attributes:
        monitor: the monitor's name.
        event_id: the fire id.
        action: the action type (empty when unknown).
        outcome: ``resent`` or ``interrupted``.
        reason: why (one line).
    """

    monitor: str
    event_id: str
    action: str
    outcome: str
    reason: str


async def recover(store: FireStore, monitors: Mapping[str, Monitor],
                  dispatcher: Redeliverer, *,
                  unfinished: list[tuple[str, FireRecord]] | None = None) -> list[Recovered]:
    """Settle every unfinished fire (see the module docstring); return what was done.

    ``monitors`` maps name -> the monitors this daemon now runs; unfinished
    fires of other monitors are marked ``interrupted``. Re-sends are
    dispatched (detached) through ``dispatcher.redeliver``; ``drain`` waits for them.
    ``unfinished``: ``store.unfinished_fires()`` when the caller already read it
    (it skips loading the monitors when there is none); None reads it here.
    """
    out: list[Recovered] = []
    if unfinished is None:
        unfinished = await asyncio.to_thread(store.unfinished_fires)
    for name, record in unfinished:
        event = record_to_event(record, monitor=name)
        monitor = monitors.get(name)
        action = str(record.get("action") or (monitor.action.type if monitor else ""))
        was = status_of(record)
        if monitor is None:
            reason = f"{was} at start; monitor no longer configured here: not re-sent"
        elif event.fingerprint and event.fingerprint != monitor.fingerprint:
            reason = f"{was} at start; monitor changed since (fingerprint): not re-sent"
        elif registry.recovery(action) is Recovery.RESEND:
            out.append(Recovered(name, event.id, action, "resent",
                                 f"{was} at start: re-sent with the same id (at-least-once)"))
            await dispatcher.redeliver(monitor, event)
            continue
        elif was == FireStatus.PENDING:
            reason = "pending at start: never started; not re-spawned (at-most-once)"
        else:
            reason = "dispatched at start: outcome unknown; not re-spawned (at-most-once)"
        reasons = record.get("reasons")
        await asyncio.to_thread(store.update_fire, name, event.id,
                                status=str(FireStatus.INTERRUPTED),
                                finishedAt=timestamps.utc_micro(),
                                action=action, reason=reason,
                                reasons=[*(reasons if isinstance(reasons, list) else []), reason])
        out.append(Recovered(name, event.id, action, "interrupted", reason))
    return out
