"""Fire records: ``monitors/<name>/fires/<id>/event.json``, one per fire.

A record is created durably (file and directories fsynced) before anyone acts on
the fire, and updated durably as actions move it along (``actions.records``). A
fire also counts in liveness (``liveness.LivenessLog.record_fire``). Condition
state and the other per-monitor records live in ``store``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from reconciler import atomic, errors, timestamps
from reconciler.events import Event
from reconciler.state import records
from reconciler.state.layout import EVENT_FILE, FIRES_DIR, check_name
from reconciler.state.liveness import LivenessLog


class FireLog(LivenessLog):
    """The fire-record part of ``store.Store`` (see the module docstring)."""

    def fire_dir(self, name: str, event_id: str) -> Path:
        """``<state>/monitors/<name>/fires/<id>``."""
        return self.monitor_dir(name) / FIRES_DIR / check_name(event_id)

    def create_fire(
        self,
        name: str,
        event: Event,
        *,
        status: str = "pending",
        state: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> Path:
        """Create ``fires/<event.id>/event.json`` durably and count the fire in liveness.

        Args:
            status: the record's initial status (``pending`` until actions take it).
            state: the condition state this fire commits (see ``records.FireRecord``).
            at: Unix seconds of the fire (default: now), for liveness.

        Returns:
            The path of ``event.json``.

        Raises:
            OSError: the write failed; nothing was created.
        """
        with self._writes.track(name):
            path = self._create_fire(name, event, status=status, state=state, at=at)
        self.record_fire(name, at=at if at is not None else time.time())
        return path

    def _create_fire(self, name: str, event: Event, *, status: str,
                     state: Mapping[str, Any] | None, at: float | None) -> Path:
        fires = self._ensure_dir(name, durable=True) / FIRES_DIR
        if not fires.is_dir():
            fires.mkdir(mode=atomic.DIR_MODE, exist_ok=True)
            atomic.fsync_dir(fires.parent)
        directory = fires / check_name(event.id)
        directory.mkdir(mode=atomic.DIR_MODE)
        now = timestamps.utc_micro(at) if at is not None else event.fired_at
        record: records.FireRecord = {
            "version": records.FIRE_VERSION,
            "id": event.id,
            "monitor": name,
            "status": status,
            "attempts": 0,
            "reasons": [event.reason] if event.reason else [],
            "createdAt": now,
            "updatedAt": now,
            "event": event.to_json(),
        }
        if state is not None:
            record["state"] = dict(state)
        path = directory / EVENT_FILE
        try:
            atomic.write_json(path, record, durable=True)
            atomic.fsync_dir(fires)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return path

    def write_fire_file(self, name: str, event_id: str, file: str, data: bytes, *,
                        durable: bool) -> Path:
        """Write ``data`` to ``fires/<id>/<file>`` beside the fire record (an action's
        ``output.log`` or ``prompt.txt``) atomically, creating the directory when
        missing; ``durable``: fsync file and directory. Returns the path.

        Raises:
            errors.StateError: ``file`` or the names are not one path component.
            OSError: the write failed; the previous file is unchanged.
        """
        path = self.fire_dir(name, event_id) / check_name(file)
        atomic.make_dirs(path.parent)
        atomic.write_bytes(path, data, durable=durable)
        return path

    def read_fire(self, name: str, event_id: str) -> records.FireRecord | None:
        """One fire record, or None when missing or unreadable (reported)."""
        loaded = self._read(self.fire_dir(name, event_id) / EVENT_FILE, records.FIRE_VERSION)
        readable = loaded.status in (records.Status.OK, records.Status.FUTURE)
        return cast(records.FireRecord, loaded.data) if readable else None

    def update_fire(self, name: str, event_id: str, **fields: Any) -> None:
        """Merge ``fields`` (``records.FireRecord`` keys) into a fire record and write it
        durably (``updatedAt`` set).

        Raises:
            errors.StateError: no such fire record, or it has a future version.
            OSError: the write failed; the record is unchanged.
        """
        path = self.fire_dir(name, event_id) / EVENT_FILE
        loaded = self._read(path, records.FIRE_VERSION)
        if loaded.status is records.Status.FUTURE:
            raise records.FutureVersionError(loaded.problem or "future version")
        if loaded.data is None:
            raise errors.StateError(f"{path}: no fire record {event_id} for {name}")
        record = {**loaded.data, **fields, "version": records.FIRE_VERSION,
                  "updatedAt": timestamps.utc_micro()}
        with self._writes.track(name):
            atomic.write_json(path, record, durable=True)

    def delete_fire(self, name: str, event_id: str) -> None:
        """Remove a fire record (rolls back a fire whose state write failed)."""
        directory = self.fire_dir(name, event_id)
        shutil.rmtree(directory, ignore_errors=True)
        with contextlib.suppress(OSError):
            atomic.fsync_dir(directory.parent)

    def fire_ids(self, name: str) -> list[str]:
        """The monitor's fire ids, newest first (ids sort by time)."""
        try:
            ids = [p.name for p in (self.monitor_dir(name) / FIRES_DIR).iterdir()
                   if not p.name.startswith(".")]
        except FileNotFoundError:
            return []
        return sorted(ids, reverse=True)

    def fire_tally(self, name: str) -> records.FireTally:
        """``{"fireCount": n, "lastFiredAt": Unix seconds | None}`` counted from the fire
        records themselves (a directory listing and one ``stat`` per fire, no record
        read: 10,000 fires in about 30 ms), so what ``list`` shows agrees with ``runs``:
        the coalesced count in ``liveness.json`` loses the fires since its last flush
        when the daemon is killed, and a fire directory a kill left without its
        ``event.json`` is no fire. ``lastFiredAt`` comes from the newest id
        (``<yyyymmddTHHMMSS.ffffff>-<hex>``), None when it has another form.
        """
        base = f"{self.monitor_dir(name) / FIRES_DIR}{os.sep}"
        tail = f"{os.sep}{EVENT_FILE}"
        ids = [i for i in self.fire_ids(name) if os.path.exists(base + i + tail)]
        last: float | None = None
        if ids:
            with contextlib.suppress(ValueError):
                stamp = dt.datetime.strptime(ids[0].split("-", 1)[0], "%Y%m%dT%H%M%S.%f")
                last = stamp.replace(tzinfo=dt.UTC).timestamp()
        return {"fireCount": len(ids), "lastFiredAt": last}

    def fires(self, name: str, limit: int | None = None) -> list[records.FireRecord]:
        """The monitor's fire records, newest first (at most ``limit``)."""
        out: list[records.FireRecord] = []
        for event_id in self.fire_ids(name):
            if limit is not None and len(out) >= limit:
                break
            record = self.read_fire(name, event_id)
            if record is not None:
                out.append(record)
        return out

    def unfinished_fires(
        self, statuses: frozenset[str] = frozenset({"pending", "dispatched"})
    ) -> list[tuple[str, records.FireRecord]]:
        """Every fire record whose status is in ``statuses``, oldest first, as
        ``(monitor name, record)``."""
        out: list[tuple[str, records.FireRecord]] = []
        for name in self.names():
            for event_id in reversed(self.fire_ids(name)):
                record = self.read_fire(name, event_id)
                if record is not None and record.get("status", "pending") in statuses:
                    out.append((name, record))
        return out

    def pending_fires(self) -> list[tuple[str, records.FireRecord]]:
        """Every fire record still ``pending`` (crash recovery), oldest first."""
        return self.unfinished_fires(frozenset({"pending"}))
