"""Fire-record statuses and the store seam actions write through.

A fire record (``<state>/monitors/<name>/fires/<id>/event.json``) is created
``pending`` by the evaluator (durable before dispatch) and moved by
``actions.dispatch``::

    pending -> dispatched -> succeeded | failed
    pending -> skipped                      (run/routine overlap: skip)
    pending | dispatched -> interrupted     (run/routine found unfinished after a crash)

Fields actions add (all optional, JSON): ``status``, ``action`` (type),
``attempts``, ``reason``, ``dispatchedAt``, ``finishedAt``, ``exitCode``,
``durationSeconds``, ``output`` (file name beside event.json), ``outputBytes``,
``outputTruncated``, ``httpStatus``, ``channels``, ``command``, ``argv0``,
``queuedBehind``, ``recovered``, ``signed``, ``body`` (a webhook-out's body as
sent, repeated byte for byte by a re-send); each ``reason`` is also appended to
the record's ``reasons`` list.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.events import Event
from reconciler.model import Fingerprint, MonitorName

if TYPE_CHECKING:
    from reconciler.state.records import AutoPause, Drought, DroughtMark, FireRecord


class FireStatus(enum.StrEnum):
    """Where a fire record stands."""

    PENDING = "pending"
    DISPATCHED = "dispatched"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"


UNFINISHED = frozenset({FireStatus.PENDING, FireStatus.DISPATCHED})
OUTPUT_FILE = "output.log"
PROMPT_FILE = "prompt.txt"


class FireStore(Protocol):
    """The part of ``state.store.Store`` actions use (see that module)."""

    def update_fire(self, name: str, event_id: str, **fields: Any) -> None:
        """Merge ``fields`` into the fire record, durably."""
        ...

    def fires(self, name: str, *, limit: int | None = None) -> list[FireRecord]:
        """The monitor's fire records, newest first (at most ``limit``)."""
        ...

    def read_fire(self, name: str, event_id: str) -> FireRecord | None:
        """One fire record, or None."""
        ...

    def unfinished_fires(
        self, statuses: frozenset[str] = ...
    ) -> list[tuple[str, FireRecord]]:
        """Every ``pending`` or ``dispatched`` fire record, oldest first, as
        ``(monitor name, record)``."""
        ...

    def write_fire_file(self, name: str, event_id: str, file: str, data: bytes, *,
                        durable: bool) -> Path:
        """Write a file beside the fire record (``output.log``, ``prompt.txt``)."""
        ...

    def append_notification(self, data: bytes) -> Path:
        """Append lines to ``<state>/notifications.log``, fsynced."""
        ...

    def monitor_dir(self, name: str) -> Path:
        """``<state>/monitors/<name>``."""
        ...

    def set_autopause(self, name: str, reason: str, at: float | str) -> None:
        """Auto-pause ``name`` in running state, durably."""
        ...

    def clear_autopause(self, name: str) -> None:
        """Clear an auto-pause."""
        ...

    def autopause(self, name: str) -> AutoPause | None:
        """The auto-pause record of ``name``, or None."""
        ...

    def drought(self, name: str) -> Drought:
        """The droughts the owner has been told about (``{}``: none)."""
        ...

    def set_drought(self, name: str, *, checks: DroughtMark | None = ...,
                    fires: DroughtMark | None = ...) -> None:
        """Record durably which droughts the owner has been told about."""
        ...


def fire_dir(store: FireStore, name: str, event_id: str) -> Path:
    """``<state>/monitors/<name>/fires/<id>`` (the directory holding ``event.json``)."""
    return store.monitor_dir(name) / "fires" / event_id


def record_to_event(record: Mapping[str, Any], *, monitor: str | None = None) -> Event:
    """Rebuild the ``Event`` from a fire record (``Event.to_json`` keys, optionally
    nested under ``"event"`` as an object). Missing fields become empty."""
    src: Mapping[str, Any] = record
    nested = record.get("event")
    if isinstance(nested, Mapping):
        src = nested
    summary = src.get("event", src.get("summary", ""))
    return Event(
        id=str(src.get("id", record.get("id", ""))),
        monitor=MonitorName(str(src.get("monitor", monitor or ""))),
        fingerprint=Fingerprint(str(src.get("fingerprint", ""))),
        fired_at=str(src.get("firedAt", "")),
        summary=str(summary) if not isinstance(summary, Mapping) else "",
        signature=str(src.get("signature", "")),
        observation=str(src.get("observation", "")),
        meta=dict(src.get("meta") or {}),
        groups=tuple(src.get("groups") or ()),
        reason=str(src.get("reason", "")),
        kind=str(src.get("kind", "fired")),
        previous=src.get("previous") if isinstance(src.get("previous"), str) else None,
        diff=str(src.get("diff") or ""),
    )


def status_of(record: Mapping[str, Any]) -> str:
    """The record's status (``pending`` when absent)."""
    return str(record.get("status", FireStatus.PENDING))
