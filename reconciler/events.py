"""The event a fire produces, and the dispatcher seam between engine and actions.

The evaluator (``daemon.evaluator``) decides and persists; it hands each fire to
a ``Dispatcher``. ``actions.dispatch`` implements the real one; tests use a
recording one. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.model import Fingerprint, Monitor, MonitorName

EXCERPT_CHARS = 4000


@dataclass(frozen=True, slots=True)
class Event:
    """One fire of one monitor.

    Attributes:
        id: unique fire id (sortable: ``<UTC yyyymmddTHHMMSS.ffffff>-<8 hex>``); also
            the fire directory name and webhook-out's ``Idempotency-Key``.
        monitor: the monitor's name.
        fingerprint: the monitor's fingerprint at fire time.
        fired_at: ISO-8601 UTC time of the fire.
        summary: the event summary (the ``{{ event }}`` of templates).
        signature: the condition's signature of the observation.
        observation: the observation text (after ``ignore``), capped at
            ``EXCERPT_CHARS`` characters.
        meta: the observation's meta mapping.
        groups: the match regex's groups (empty for on-change / every).
        reason: the condition's reason (``changed``, ``matched new signature``, ``every``,
            ``resolved``).
        kind: ``fired``, or ``resolved`` when an episode closed with ``resolve: true``
            (``{{ kind }}`` in templates).
        previous: the previous stored observation (capped like ``observation``), or
            None when there is none (the first fire of a ``match`` monitor).
        diff: the unified diff from ``previous`` to ``observation``, bounded
            (``conditions.diff``); ``""`` when there is no previous observation.
        fencing_token: for an ``owners:`` monitor, the create revision of the etcd
            holder key the fire was confirmed under (``daemon.leases``); else None.
    """

    id: str
    monitor: MonitorName
    fingerprint: Fingerprint
    fired_at: str
    summary: str
    signature: str
    observation: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str | None, ...] = ()
    reason: str = ""
    kind: str = "fired"
    previous: str | None = None
    diff: str = ""
    fencing_token: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The event as the JSON object webhook-out POSTs and ``event.json`` stores."""
        return {
            "id": self.id,
            "monitor": self.monitor,
            "fingerprint": self.fingerprint,
            "firedAt": self.fired_at,
            "event": self.summary,
            "signature": self.signature,
            "observation": self.observation,
            "meta": dict(self.meta),
            "groups": list(self.groups),
            "reason": self.reason,
            "kind": self.kind,
            "previous": self.previous,
            "current": self.observation,
            "diff": self.diff,
            **({"fencingToken": self.fencing_token} if self.fencing_token is not None else {}),
        }


class Dispatcher(Protocol):
    """Carries out a monitor's action for one event.

    ``dispatch`` is called by the evaluator after the new state and the
    ``pending`` fire record are durable. It must return promptly (long actions
    are detached) and must never raise: failures are recorded in the fire record.
    """

    async def dispatch(self, monitor: Monitor, event: Event) -> None:
        """Carry out ``monitor.action`` for ``event``."""
        ...


class Guard(Protocol):
    """Hygiene hooks the evaluator calls around checks and fires (rate limit, drought).

    ``actions.guards`` implements it; the evaluator takes one optionally.
    """

    def allow_fire(self, monitor: Monitor, event: Event) -> bool:
        """Return False when firing now would breach ``monitor.rate_limit``; the guard
        has then auto-paused the monitor in running state (and notified the owner once)."""
        ...

    async def after_check(self, monitor: Monitor, *, ok: bool, error: str | None) -> None:
        """Called after every check; counts the drought streak of failed checks."""
        ...
