"""``lifecycle.json``: a self-ending monitor's progress and completion (the
``store.Store`` part that ``conditions.lifecycle`` needs).

Only monitors with ``until``, ``stopAfter`` or ``stopWhen`` have the record::

    {"version": 1, "key": "<fingerprint>:<lifecycle digest>", "startedAt": 1750000000.0,
     "fires": 2, "completed": {"reason": "stopWhen matched 'merged'", "at": "...Z"}}

``key`` (``conditions.lifecycle.key``) ties it to the monitor's fingerprint and end
conditions: a record under another key is replaced by a fresh one (an edit restarts
the monitor's life); a completed record under the same key keeps the monitor from
being started again (``completions``, what plan excludes). Writes are durable and
happen at the first start, on a fire and on completion only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from reconciler import timestamps
from reconciler.model import MonitorName
from reconciler.state import records
from reconciler.state.fires import FireLog

LIFECYCLE_FILE = "lifecycle.json"
LIFECYCLE_VERSION = 1


class Completed(TypedDict):
    """Why and when a monitor completed (``at``: ISO-8601 UTC)."""

    reason: str
    at: str


class LifecycleRecord(TypedDict, total=False):
    """``lifecycle.json`` (see the module docstring; ``startedAt``: Unix seconds)."""

    version: int
    key: str
    startedAt: float
    fires: int
    completed: Completed | None


class LifecycleLog(FireLog):
    """The lifecycle part of ``store.Store`` (see the module docstring)."""

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        super().__init__(state_dir, readonly=readonly)
        self._lifecycle: dict[str, LifecycleRecord] = {}

    def lifecycle(self, name: str) -> LifecycleRecord | None:
        """The record, or None (none, unreadable or from a newer version)."""
        with self._lock:
            cached = self._lifecycle.get(name)
            if cached is not None:
                return cached.copy()
        loaded = self._read(self.monitor_dir(name) / LIFECYCLE_FILE, LIFECYCLE_VERSION)
        if loaded.status is not records.Status.OK or not loaded.data:
            return None
        record: LifecycleRecord = {
            "version": LIFECYCLE_VERSION, "key": str(loaded.data.get("key", "")),
            "startedAt": float(loaded.data.get("startedAt") or 0.0),
            "fires": int(loaded.data.get("fires") or 0),
            "completed": loaded.data.get("completed")}
        with self._lock:
            self._lifecycle[name] = record
        return record.copy()

    def begin_lifecycle(self, name: str, key: str, at: float) -> LifecycleRecord:
        """The record under ``key``: the stored one, or a fresh one (written durably,
        ``startedAt`` = ``at``) when there is none or it is under another key."""
        record = self.lifecycle(name)
        if record is not None and record.get("key") == key:
            return record
        record = {"version": LIFECYCLE_VERSION, "key": key, "startedAt": at, "fires": 0,
                  "completed": None}
        self._save_lifecycle(name, record)
        return record.copy()

    def count_lifecycle_fire(self, name: str) -> LifecycleRecord | None:
        """Add one fire to the record (durably); None when there is no record."""
        record = self.lifecycle(name)
        if record is None:
            return None
        record["fires"] = int(record.get("fires") or 0) + 1
        self._save_lifecycle(name, record)
        return record

    def complete(self, name: str, reason: str, at: float) -> None:
        """Record durably that ``name`` completed (survives restarts)."""
        record = self.lifecycle(name)
        if record is None:
            return
        record["completed"] = {"reason": reason, "at": timestamps.utc_micro(at)}
        self._save_lifecycle(name, record)

    def completions(self) -> dict[MonitorName, tuple[str, str]]:
        """Every completed monitor -> ``(key, reason)`` (what plan excludes while the
        monitor's key is unchanged)."""
        out: dict[MonitorName, tuple[str, str]] = {}
        for name in self.names():
            if not (self.monitor_dir(name) / LIFECYCLE_FILE).exists():
                continue
            record = self.lifecycle(name)
            done = record.get("completed") if record else None
            if record and done:
                out[MonitorName(name)] = (str(record.get("key")), str(done.get("reason")))
        return out

    def _save_lifecycle(self, name: str, record: LifecycleRecord) -> None:
        if self.readonly:
            with self._lock:
                self._lifecycle[name] = record
            return
        self._write_record(name, LIFECYCLE_FILE, dict(record))
        with self._lock:
            self._lifecycle[name] = record
