"""The state store: per-monitor condition state, liveness, fire records, auto-pause,
pid markers and drought alarms.

See ``reconciler.state`` for the layout. One ``Store`` per process; the daemon
holds ``lock.StateLock`` while it writes. Methods are synchronous and
thread-safe; the evaluator calls the durable ones through ``asyncio.to_thread``.
``Store`` is built from parts with one job each: ``layout.StoreBase`` (directories,
checked reads, write-error tracking), ``liveness.LivenessLog`` (the coalesced
heartbeat), ``fires.FireLog`` (fire records), ``lifecycle.LifecycleLog`` (self-ending
monitors' progress and completion); this module adds the small durable records.

Write costs (DESIGN.md §4):

* ``write_state``, ``create_fire``, ``update_fire``, ``set_autopause``,
  ``set_pid_marker``, ``set_drought``: one atomic write, fsynced file and directory;
* ``record_check``: memory only; ``flush`` later writes one file for every
  monitor's heartbeat (atomic, not fsynced; ``liveness``), so a poll costs O(1)
  bytes and a flush one write whatever the number of monitors.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from reconciler import atomic, timestamps
from reconciler.model import MonitorName
from reconciler.state import records
from reconciler.state.layout import (
    AUTOPAUSE_FILE,
    DROUGHT_FILE,
    MONITORS_DIR,
    NOTIFICATIONS_FILE,
    PID_MARKER_FILE,
    STATE_FILE,
    STOPPED_FILE,
    file_sig,
)
from reconciler.state.lifecycle import LifecycleLog
from reconciler.state.liveness import LIVENESS_FLUSH_INTERVAL
from reconciler.state.livenessview import liveness_view

__all__ = ["LIVENESS_FLUSH_INTERVAL", "STATE_FILE", "Store", "autopause_text", "iso",
           "liveness_view", "refused_reason"]

_UNREAD: Any = object()
"""``Store.autopaused``: the auto-pause of that monitor was not read yet."""

iso = timestamps.utc_micro
"""Unix seconds -> ISO-8601 UTC with microseconds and ``Z`` (every record's times)."""


def refused_reason(version: object) -> str:
    """Why a monitor whose ``state.json`` has format ``version`` is not run (one line)."""
    return (f"state.json has format version {version}, newer than this monitors supports "
            "(kept untouched)")


def autopause_text(record: Mapping[str, Any]) -> str:
    """Why an auto-paused monitor does not run, from its ``records.AutoPause`` (one line,
    for plan and the daemon log)."""
    return (f"{record.get('reason', 'rate limit')} (since {record.get('at', '?')}; "
            "`monitors resume` clears it)")


class Store(LifecycleLog):
    """The state directory of one machine: condition state, fire records, auto-pause,
    drought, stop reasons and notifications on top of the layout, liveness and lifecycle
    of its bases (arguments and attributes: ``layout.StoreBase``)."""

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        super().__init__(state_dir, readonly=readonly)
        self._autopause: dict[str, records.AutoPause | None] = {}
        # state.json as this process last read or wrote it (``layout.file_sig``): a write
        # re-reads the on-disk version only when the file changed since.
        self._state_seen: dict[str, tuple[int, int, int, int] | None] = {}
        self._drought_frozen: set[str] = set()  # future-version drought.json: kept
        self._log_lock = threading.Lock()  # one notifications.log append at a time

    # -- condition state ------------------------------------------------------

    def read_state(self, name: str) -> records.StateRecord | None:
        """The monitor's ``state.json``, or None when there is none (fresh baseline).

        A corrupt file is moved aside, reported in ``problems`` and read as None.

        Raises:
            records.FutureVersionError: the file has a newer format version (kept; do
                not run the monitor).
            errors.StateError: the file exists but cannot be read.
        """
        path = self.monitor_dir(name) / STATE_FILE
        loaded = self._read(path, records.STATE_VERSION)
        if loaded.status is records.Status.FUTURE:
            raise records.FutureVersionError(loaded.problem or "future version")
        with self._lock:
            self._state_seen[name] = file_sig(path)
        return cast(records.StateRecord, loaded.data) if loaded.status is records.Status.OK \
            else None

    def refusal(self, name: str) -> str | None:
        """``refused_reason`` when ``state.json`` has a newer format version, else None
        (missing, readable or corrupt; nothing is moved or written)."""
        try:
            loaded = records.read(self.monitor_dir(name) / STATE_FILE,
                                  supported=records.STATE_VERSION, move_corrupt=False)
        except OSError:
            return None
        if loaded.status is not records.Status.FUTURE:
            return None
        return refused_reason((loaded.data or {}).get("version"))

    def write_state(self, name: str, record: Mapping[str, Any]) -> None:
        """Write ``state.json`` (``records.StateRecord`` keys) durably (``version`` is
        set here).

        A ``state.json`` of a newer format version is never overwritten, also when it
        appeared after this process read the record: when the file changed since this
        process last read or wrote it (a ``stat``), its version is re-read first.

        Raises:
            records.FutureVersionError: the file on disk now has a newer format
                version (kept untouched; park the monitor).
            errors.StateError: the store is read-only.
            OSError: the write failed; the previous file is unchanged.
        """
        with self._writes.track(name):
            self._write_state(name, record)

    def _write_state(self, name: str, record: Mapping[str, Any]) -> None:
        path = self._ensure_dir(name, durable=True) / STATE_FILE
        current = file_sig(path)
        with self._lock:
            seen = self._state_seen.get(name, ())
        if current is not None and current != seen:
            loaded = records.read(path, supported=records.STATE_VERSION, move_corrupt=False)
            if loaded.status is records.Status.FUTURE:
                version = (loaded.data or {}).get("version")
                if loaded.problem:
                    self._report(loaded.problem)
                raise records.FutureVersionError(f"{path}: {refused_reason(version)}; "
                                                 "not run (upgrade monitors)")
        atomic.write_json(path, {**record, "version": records.STATE_VERSION}, durable=True)
        with self._lock:
            self._state_seen[name] = file_sig(path)

    # -- auto-pause -----------------------------------------------------------

    def set_autopause(self, name: str, reason: str, at: float | str) -> None:
        """Auto-pause ``name`` (rate limit breached), durably; survives restarts.

        Args:
            at: Unix seconds or an ISO-8601 string.
        """
        when = timestamps.utc_micro(at) if isinstance(at, int | float) else str(at)
        record: records.AutoPause = {"version": records.AUTOPAUSE_VERSION, "reason": reason,
                                     "at": when}
        self._write_record(name, AUTOPAUSE_FILE, record)
        with self._lock:
            self._autopause[name] = record

    def clear_autopause(self, name: str) -> None:
        """Remove an auto-pause (``resume``); no-op when not paused."""
        self._remove_record(name, AUTOPAUSE_FILE)
        with self._lock:
            self._autopause[name] = None

    def autopause(self, name: str) -> records.AutoPause | None:
        """The auto-pause record (``reason``, ``at``) or None. Cached after the first read."""
        with self._lock:
            if name in self._autopause:
                cached = self._autopause[name]
                return cached.copy() if cached else None
        loaded = self._read(self.monitor_dir(name) / AUTOPAUSE_FILE, records.AUTOPAUSE_VERSION)
        # A future-version pause still pauses: never run what we cannot read.
        readable = loaded.status in (records.Status.OK, records.Status.FUTURE)
        record = cast(records.AutoPause, loaded.data) if readable else None
        with self._lock:
            self._autopause[name] = record
        return record.copy() if record else None

    def autopaused(self, name: str) -> bool:
        """True when ``name`` is auto-paused: ``autopause`` without the lock and the copy
        once cached (the engine asks before every poll; one dict read is atomic)."""
        cached = self._autopause.get(name, _UNREAD)
        if cached is _UNREAD:
            return self.autopause(name) is not None
        return cached is not None

    # -- stop reasons (monitor_stop) ------------------------------------------

    def set_stopped(self, name: str, *, reason: str, by: str, action: str,
                    at: float) -> None:
        """Record durably why ``name`` was stopped (``at``: Unix seconds); it outlives
        the monitor's file, so ``view`` and ``monitor_inspect`` can still say why."""
        record: records.Stopped = {"version": records.STOPPED_VERSION, "reason": reason,
                                   "at": timestamps.utc_micro(at), "by": by, "action": action}
        self._write_record(name, STOPPED_FILE, record)

    def stopped(self, name: str) -> records.Stopped | None:
        """The stop record of ``name`` (``reason``, ``at``, ``by``, ``action``) or None."""
        loaded = self._read(self.monitor_dir(name) / STOPPED_FILE, records.STOPPED_VERSION)
        return cast(records.Stopped, loaded.data) if loaded.status is records.Status.OK \
            else None

    def clear_stopped(self, name: str) -> None:
        """Forget a stop record (the name was armed again); no-op when there is none."""
        self._remove_record(name, STOPPED_FILE)

    def autopause_reasons(self) -> dict[MonitorName, str]:
        """Every auto-paused monitor -> ``autopause_text`` (what plan excludes)."""
        out: dict[MonitorName, str] = {}
        for name in self.names():
            record = self.autopause(name)
            if record:
                out[MonitorName(name)] = autopause_text(record)
        return out

    # -- pid marker -----------------------------------------------------------

    def pid_marker(self, name: str) -> records.PidMarker | None:
        """The pid marker (``pid``, ``seenRunningAt``, ``startTime`` when known) or None."""
        loaded = self._read(self.monitor_dir(name) / PID_MARKER_FILE, records.MARKER_VERSION)
        return cast(records.PidMarker, loaded.data) if loaded.status is records.Status.OK \
            else None

    def set_pid_marker(self, name: str, pid: int, at: float, *,
                       start_time: int | None = None) -> None:
        """Record durably that ``pid`` was seen running (a forced pid watch may now exit),
        with its start time (clock ticks since boot, ``processes.start_time``) when known."""
        record: records.PidMarker = {"version": records.MARKER_VERSION, "pid": pid,
                                     "seenRunningAt": timestamps.utc_micro(at)}
        if start_time is not None:
            record["startTime"] = start_time
        self._write_record(name, PID_MARKER_FILE, record)

    # -- drought --------------------------------------------------------------

    def drought(self, name: str) -> records.Drought:
        """The droughts the owner has been told about (``records.Drought``; ``{}`` when
        none). A corrupt file is moved aside and reported, and reads as none; a file
        of a newer format version is reported, kept and never overwritten.

        Raises:
            errors.StateError: the file exists but cannot be read.
        """
        loaded = self._read(self.monitor_dir(name) / DROUGHT_FILE, records.DROUGHT_VERSION)
        with self._lock:
            if loaded.status is records.Status.FUTURE:
                self._drought_frozen.add(name)
            else:
                self._drought_frozen.discard(name)
        if loaded.status is not records.Status.OK or loaded.data is None:
            return {}
        out: records.Drought = {}
        for kind in ("checks", "fires"):
            mark = loaded.data.get(kind)
            if isinstance(mark, dict):
                out[kind] = cast(records.DroughtMark, mark)
        return out

    def set_drought(self, name: str, *, checks: records.DroughtMark | None = None,
                    fires: records.DroughtMark | None = None) -> None:
        """Write ``drought.json`` durably: the droughts the owner has now been told about
        (None: not in drought). Format version ``records.DROUGHT_VERSION`` (1): the
        same file the guards wrote before it went through the store.

        Raises:
            records.FutureVersionError: the file has a newer format version (kept).
            errors.StateError: the store is read-only.
            OSError: the write failed; the previous file is unchanged.
        """
        with self._lock:
            frozen = name in self._drought_frozen
        if frozen:
            raise records.FutureVersionError(
                f"{self.monitor_dir(name) / DROUGHT_FILE}: newer format version kept; "
                "not overwritten (upgrade monitors)")
        record: records.Drought = {"version": records.DROUGHT_VERSION}
        if checks is not None:
            record["checks"] = checks
        if fires is not None:
            record["fires"] = fires
        self._write_record(name, DROUGHT_FILE, record)

    # -- notifications log ----------------------------------------------------

    def append_notification(self, data: bytes) -> Path:
        """Append ``data`` (whole lines) to ``<state>/notifications.log``, fsynced,
        creating the state directory when missing; returns the log's path.

        Raises:
            OSError: the append failed (its ``filename`` is the log).
        """
        path = self.root / NOTIFICATIONS_FILE
        with self._log_lock:
            atomic.make_dirs(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                         atomic.FILE_MODE)
            try:
                os.write(fd, data)
                os.fsync(fd)
            except OSError as e:
                if e.filename is None:
                    raise OSError(e.errno, e.strerror, str(path)) from e
                raise
            finally:
                os.close(fd)
        return path

    # -- rename and housekeeping ---------------------------------------------

    def forget(self, name: str) -> None:
        """Drop in-memory caches of ``name`` (on stop); its liveness stays in the
        aggregate the next flush writes."""
        with self._lock:
            self._autopause.pop(name, None)
            self._state_seen.pop(name, None)
            self._drought_frozen.discard(name)
        self._forget_liveness(name)

    def rename(self, old: str, new: str) -> None:
        """Carry ``old``'s running state over to ``new`` (a rename: same fingerprint).

        An existing ``new`` directory is moved aside first (``<new>.replaced-<stamp>``).
        No-op when ``old`` has no state.

        Raises:
            OSError: the rename failed.
        """
        self.flush()
        src, dst = self.monitor_dir(old), self.monitor_dir(new)
        if not src.is_dir():
            return
        if dst.exists():
            os.replace(dst, dst.with_name(f".{new}.replaced-{records.utc_stamp()}"))
        os.replace(src, dst)
        atomic.fsync_dir(dst.parent)
        with self._lock:
            self._rename_liveness(old, new)
            if old in self._autopause:
                self._autopause[new] = self._autopause.pop(old)

    def quarantined(self) -> list[Path]:
        """Every record moved aside as corrupt (``*.corrupt-*``) under the state dir."""
        base = self.root / MONITORS_DIR
        if not base.is_dir():
            return []
        return sorted(base.glob(f"**/*{records.CORRUPT_INFIX}*"))
