"""The state store: per-monitor condition state, liveness, fire records, auto-pause.

See ``reconciler.state`` for the layout. One ``Store`` per process; the daemon
holds ``lock.StateLock`` while it writes. Methods are synchronous and
thread-safe; the evaluator calls the durable ones through ``asyncio.to_thread``.

Write costs (DESIGN.md §4):

* ``write_state``, ``create_fire``, ``update_fire``, ``set_autopause``: one
  atomic write, fsynced file and directory;
* ``record_check``: memory only; ``flush`` later writes each changed monitor's
  ``liveness.json`` once (atomic, not fsynced), so a poll costs O(1) bytes and
  many polls of one monitor between flushes cost one small write.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler import durations, errors
from reconciler.events import Event
from reconciler.model import Monitor
from reconciler.state import atomic, records, writeerrors

MONITORS_DIR = "monitors"
STATE_FILE = "state.json"
LIVENESS_FILE = "liveness.json"
AUTOPAUSE_FILE = "autopause.json"
PID_MARKER_FILE = "pid-marker.json"
FIRES_DIR = "fires"
EVENT_FILE = "event.json"
README_FILE = "README"

LIVENESS_FLUSH_INTERVAL = 5.0


def refused_reason(version: object) -> str:
    """Why a monitor whose ``state.json`` has format ``version`` is not run (one line)."""
    return (f"state.json has format version {version}, newer than this monitors supports "
            "(kept untouched)")


def _file_sig(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, mtime ns, size) of ``path``, or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
"""Seconds between liveness flushes in the daemon; ``liveness_view`` allows this
much extra age before calling a monitor STALLED."""

README_TEXT = """\
This directory is the per-machine running state of `monitors` (regenerable; never
commit it). One daemon at a time writes here (daemon.lock holds its pid).

  daemon.lock                            lock held by the running daemon
  running.json                           what the daemon runs and the applied revision
  monitors/<name>/state.json             condition state: fingerprint, baseline, last
                                         signature (written on baseline or fire only)
  monitors/<name>/liveness.json          heartbeat: lastCheckedAt, checkCount, lastError,
                                         consecutiveErrors, lastFiredAt, fireCount
  monitors/<name>/autopause.json         a rate-limit auto-pause (`monitors resume` clears it)
  monitors/<name>/pid-marker.json        pid sources: the pid was seen running once
  monitors/<name>/fires/<id>/event.json  one fire: the event, status, attempts

Every record has a format "version". A file named *.corrupt-<time> is a record that
could not be read; it was moved aside and kept for inspection. Delete it when done.
Deleting monitors/<name>/ makes that monitor start again from a fresh baseline.
"""


def iso(at: float) -> str:
    """Unix seconds -> ISO-8601 UTC with microseconds and ``Z``."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _check_name(name: str) -> str:
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise errors.StateError(f"invalid monitor name for the state store: {name!r}")
    return name


class Store:
    """The state directory of one machine.

    Args:
        state_dir: the state directory (created on the first write, never on a read).
        readonly: never write anything (``monitors test``, views): corrupt records are
            reported but not moved, and every write raises ``errors.StateError``.

    Attributes:
        root: ``state_dir``.
        problems: one line per future-version or corrupt record met so far (for
            ``list``, ``plan`` and the daemon log); a corrupt record has been moved aside.
    """

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        self.root = Path(state_dir)
        self.readonly = readonly
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._liveness: dict[str, dict[str, Any]] = {}
        self._dirty: set[str] = set()
        self._frozen: set[str] = set()  # future-version liveness: never overwritten
        self._autopause: dict[str, dict[str, Any] | None] = {}
        self._known_dirs: dict[str, Path] = {}  # liveness flush: directories that exist
        self._root_ready = False
        # state.json as this process last read or wrote it (``_file_sig``): a write
        # re-reads the on-disk version only when the file changed since.
        self._state_seen: dict[str, tuple[int, int, int, int] | None] = {}
        self._writes = writeerrors.WriteErrors()  # failing writes (disk full, read-only)

    # -- layout ---------------------------------------------------------------

    def monitor_dir(self, name: str) -> Path:
        """``<state>/monitors/<name>`` (not created)."""
        return self.root / MONITORS_DIR / _check_name(name)

    def names(self) -> list[str]:
        """Names that have a directory under ``monitors/``, sorted."""
        try:
            return sorted(p.name for p in (self.root / MONITORS_DIR).iterdir() if p.is_dir())
        except FileNotFoundError:
            return []

    def _ensure_root(self) -> None:
        if self.readonly:
            raise errors.StateError(f"{self.root}: the state store is open read-only")
        if self._root_ready:
            return
        base = self.root / MONITORS_DIR
        if not base.is_dir():
            atomic.make_dirs(base)
            atomic.fsync_dir(self.root)
        readme = self.root / README_FILE
        if not readme.exists():
            atomic.write_bytes(readme, README_TEXT.encode(), durable=False)
        self._root_ready = True

    def _ensure_dir(self, name: str, *, durable: bool) -> Path:
        self._ensure_root()
        path = self.monitor_dir(name)
        if not path.is_dir():
            # No ``parents``: a store whose directory was deleted under it (``rm -rf
            # .history``) fails its writes instead of bringing the directory back.
            path.mkdir(mode=atomic.DIR_MODE, exist_ok=True)
            if durable:
                atomic.fsync_dir(path.parent)
        return path

    def _report(self, problem: str) -> None:
        with self._lock:
            if problem not in self.problems:
                self.problems.append(problem)

    def _read(self, path: Path, supported: int) -> records.Loaded:
        try:
            loaded = records.read(path, supported=supported, move_corrupt=not self.readonly)
        except OSError as e:
            raise errors.StateError(f"{path}: cannot read: {e.strerror or e}") from e
        if loaded.problem:
            self._report(loaded.problem)
        return loaded

    def write_errors(self) -> dict[str, dict[str, Any]]:
        """Monitors whose last write failed (``writeerrors.WriteErrors.snapshot``); a
        later successful write of that monitor clears it."""
        return self._writes.snapshot()

    # -- condition state ------------------------------------------------------

    def read_state(self, name: str) -> dict[str, Any] | None:
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
            self._state_seen[name] = _file_sig(path)
        return loaded.data if loaded.status is records.Status.OK else None

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
        """Write ``state.json`` durably (``version`` is set here).

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
        current = _file_sig(path)
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
            self._state_seen[name] = _file_sig(path)

    # -- liveness -------------------------------------------------------------

    def _cached_liveness(self, name: str) -> dict[str, Any]:
        """The in-memory liveness of ``name`` (loaded from disk once). Hold ``_lock``."""
        live = self._liveness.get(name)
        if live is None:
            loaded = self._read(self.monitor_dir(name) / LIVENESS_FILE, records.LIVENESS_VERSION)
            if loaded.status is records.Status.FUTURE:
                self._frozen.add(name)
            base = loaded.data if loaded.status is records.Status.OK and loaded.data else {}
            live = {
                "version": records.LIVENESS_VERSION,
                "lastCheckedAt": base.get("lastCheckedAt"),
                "checkCount": int(base.get("checkCount") or 0),
                "lastError": base.get("lastError"),
                "consecutiveErrors": int(base.get("consecutiveErrors") or 0),
                "lastFiredAt": base.get("lastFiredAt"),
                "fireCount": int(base.get("fireCount") or 0),
            }
            self._liveness[name] = live
        return live

    def liveness(self, name: str) -> dict[str, Any] | None:
        """The monitor's liveness (``records.Liveness`` keys; times in Unix seconds),
        pending changes included, or None when it was never checked."""
        with self._lock:
            live = self._liveness.get(name)
            if live is not None:
                return dict(live)
        loaded = self._read(self.monitor_dir(name) / LIVENESS_FILE, records.LIVENESS_VERSION)
        return loaded.data if loaded.status is records.Status.OK else None

    def record_check(self, name: str, *, ok: bool, error: str | None, at: float) -> None:
        """Count one check (memory only; ``flush`` writes it).

        Args:
            ok: the source produced an observation.
            error: the check error's one line when not ``ok``.
            at: Unix seconds of the check.
        """
        with self._lock:
            live = self._cached_liveness(name)
            live["lastCheckedAt"] = at
            live["checkCount"] += 1
            if ok:
                live["consecutiveErrors"] = 0
                live["lastError"] = None
            else:
                live["consecutiveErrors"] += 1
                live["lastError"] = error or "error"
            self._dirty.add(name)

    def record_fire(self, name: str, *, at: float) -> None:
        """Count one fire in liveness (memory only; ``flush`` writes it)."""
        with self._lock:
            live = self._cached_liveness(name)
            live["lastFiredAt"] = at
            live["fireCount"] += 1
            self._dirty.add(name)

    def pending_liveness(self) -> int:
        """How many monitors have liveness changes not yet flushed."""
        with self._lock:
            return len(self._dirty)

    def flush(self, limit: int | None = None) -> int:
        """Write changed ``liveness.json`` files (atomic, not fsynced); return the count.

        Args:
            limit: write at most this many (the rest stay pending), so a caller can
                spread a large flush out; None writes all.

        A write that fails stays pending and is retried by the next flush.
        """
        if self.readonly:
            return 0
        with self._lock:
            names = [n for n in self._dirty if n not in self._frozen]
            if limit is not None:
                names = names[:limit]
            batch = {n: dict(self._liveness[n]) for n in names}
            if limit is None:
                self._dirty.clear()
            else:
                self._dirty.difference_update(names)
                self._dirty.difference_update(self._frozen)
        failed: list[str] = []
        for name, live in batch.items():
            try:
                with self._writes.track(name):
                    directory = self._known_dirs.get(name)
                    if directory is None:
                        directory = self._known_dirs[name] = self._ensure_dir(
                            name, durable=False)
                    data = json.dumps(live, separators=(",", ":")).encode()
                    atomic.write_bytes(directory / LIVENESS_FILE, data, durable=False,
                                       sole_writer=True)
            except OSError:
                self._known_dirs.pop(name, None)
                failed.append(name)
        if failed:
            with self._lock:
                self._dirty.update(failed)
        return len(batch) - len(failed)

    def forget(self, name: str) -> None:
        """Drop in-memory caches of ``name`` after flushing its liveness (on stop)."""
        with self._lock:
            live = self._liveness.pop(name, None)
            dirty = name in self._dirty and name not in self._frozen
            self._dirty.discard(name)
            self._frozen.discard(name)
            self._autopause.pop(name, None)
            self._known_dirs.pop(name, None)
            self._state_seen.pop(name, None)
        if live is not None and dirty and not self.readonly:
            try:
                path = self._ensure_dir(name, durable=False) / LIVENESS_FILE
                atomic.write_bytes(path, atomic.dumps(live), durable=False)
            except OSError:
                pass

    # -- fire records ---------------------------------------------------------

    def fire_dir(self, name: str, event_id: str) -> Path:
        """``<state>/monitors/<name>/fires/<id>``."""
        return self.monitor_dir(name) / FIRES_DIR / _check_name(event_id)

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
        self.record_fire(name, at=at if at is not None else _now())
        return path

    def _create_fire(self, name: str, event: Event, *, status: str,
                     state: Mapping[str, Any] | None, at: float | None) -> Path:
        fires = self._ensure_dir(name, durable=True) / FIRES_DIR
        if not fires.is_dir():
            fires.mkdir(mode=atomic.DIR_MODE, exist_ok=True)
            atomic.fsync_dir(fires.parent)
        directory = fires / _check_name(event.id)
        directory.mkdir(mode=atomic.DIR_MODE)
        now = iso(at) if at is not None else event.fired_at
        record: dict[str, Any] = {
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

    def read_fire(self, name: str, event_id: str) -> dict[str, Any] | None:
        """One fire record, or None when missing or unreadable (reported)."""
        loaded = self._read(self.fire_dir(name, event_id) / EVENT_FILE, records.FIRE_VERSION)
        return loaded.data if loaded.status in (records.Status.OK, records.Status.FUTURE) else None

    def update_fire(self, name: str, event_id: str, **fields: Any) -> None:
        """Merge ``fields`` into a fire record and write it durably (``updatedAt`` set).

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
                  "updatedAt": iso(_now())}
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

    def fire_tally(self, name: str) -> dict[str, Any]:
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

    def fires(self, name: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The monitor's fire records, newest first (at most ``limit``)."""
        out: list[dict[str, Any]] = []
        for event_id in self.fire_ids(name):
            if limit is not None and len(out) >= limit:
                break
            record = self.read_fire(name, event_id)
            if record is not None:
                out.append(record)
        return out

    def unfinished_fires(
        self, statuses: frozenset[str] = frozenset({"pending", "dispatched"})
    ) -> list[tuple[str, dict[str, Any]]]:
        """Every fire record whose status is in ``statuses``, oldest first, as
        ``(monitor name, record)``."""
        out: list[tuple[str, dict[str, Any]]] = []
        for name in self.names():
            for event_id in reversed(self.fire_ids(name)):
                record = self.read_fire(name, event_id)
                if record is not None and record.get("status", "pending") in statuses:
                    out.append((name, record))
        return out

    def pending_fires(self) -> list[tuple[str, dict[str, Any]]]:
        """Every fire record still ``pending`` (crash recovery), oldest first."""
        return self.unfinished_fires(frozenset({"pending"}))

    # -- auto-pause -----------------------------------------------------------

    def set_autopause(self, name: str, reason: str, at: float | str) -> None:
        """Auto-pause ``name`` (rate limit breached), durably; survives restarts.

        Args:
            at: Unix seconds or an ISO-8601 string.
        """
        when = iso(at) if isinstance(at, int | float) else str(at)
        record = {"version": records.AUTOPAUSE_VERSION, "reason": reason, "at": when}
        with self._writes.track(name):
            path = self._ensure_dir(name, durable=True) / AUTOPAUSE_FILE
            atomic.write_json(path, record, durable=True)
        with self._lock:
            self._autopause[name] = record

    def clear_autopause(self, name: str) -> None:
        """Remove an auto-pause (``resume``); no-op when not paused."""
        path = self.monitor_dir(name) / AUTOPAUSE_FILE
        try:
            path.unlink()
            atomic.fsync_dir(path.parent)
        except FileNotFoundError:
            pass
        with self._lock:
            self._autopause[name] = None

    def autopause(self, name: str) -> dict[str, Any] | None:
        """The auto-pause record (``reason``, ``at``) or None. Cached after the first read."""
        with self._lock:
            if name in self._autopause:
                cached = self._autopause[name]
                return dict(cached) if cached else None
        loaded = self._read(self.monitor_dir(name) / AUTOPAUSE_FILE, records.AUTOPAUSE_VERSION)
        # A future-version pause still pauses: never run what we cannot read.
        readable = loaded.status in (records.Status.OK, records.Status.FUTURE)
        record = loaded.data if readable else None
        with self._lock:
            self._autopause[name] = record
        return dict(record) if record else None

    # -- pid marker -----------------------------------------------------------

    def pid_marker(self, name: str) -> dict[str, Any] | None:
        """The pid marker (``pid``, ``seenRunningAt``, ``startTime`` when known) or None."""
        loaded = self._read(self.monitor_dir(name) / PID_MARKER_FILE, records.MARKER_VERSION)
        return loaded.data if loaded.status is records.Status.OK else None

    def set_pid_marker(self, name: str, pid: int, at: float, *,
                       start_time: int | None = None) -> None:
        """Record durably that ``pid`` was seen running (a forced pid watch may now exit),
        with its start time (clock ticks since boot, ``processes.start_time``) when known."""
        record: dict[str, Any] = {"version": records.MARKER_VERSION, "pid": pid,
                                  "seenRunningAt": iso(at)}
        if start_time is not None:
            record["startTime"] = start_time
        with self._writes.track(name):
            path = self._ensure_dir(name, durable=True) / PID_MARKER_FILE
            atomic.write_json(path, record, durable=True)

    # -- rename and housekeeping ---------------------------------------------

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
            self._known_dirs.pop(old, None)
            self._known_dirs.pop(new, None)
            if old in self._liveness:
                self._liveness[new] = self._liveness.pop(old)
            if old in self._autopause:
                self._autopause[new] = self._autopause.pop(old)
            if old in self._dirty:
                self._dirty.discard(old)
                self._dirty.add(new)

    def quarantined(self) -> list[Path]:
        """Every record moved aside as corrupt (``*.corrupt-*``) under the state dir."""
        base = self.root / MONITORS_DIR
        if not base.is_dir():
            return []
        return sorted(base.glob(f"**/*{records.CORRUPT_INFIX}*"))


def _now() -> float:
    import time

    return time.time()


def liveness_view(
    liveness: Mapping[str, Any] | None,
    monitor: Monitor,
    now: float,
    *,
    owned: bool = True,
    slack: float = LIVENESS_FLUSH_INTERVAL,
    running: bool = True,
    write_error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``list`` and ``view`` show for a monitor's liveness, computed at read time.

    Args:
        liveness: ``Store.liveness(name)`` (None: never checked).
        monitor: the monitor (its ``active`` flag and ``source.interval``).
        now: Unix seconds.
        owned: this device evaluates the monitor.
        slack: extra age allowed for the liveness flush interval (seconds).
        running: a daemon runs an evaluator for it right now (False for a paused,
            auto-paused, refused or not-running monitor: never STALLED).
        write_error: the daemon's ``Store.write_errors()`` entry for the monitor
            (``error``, ``since``): its checks run but cannot be recorded, so the
            files are stale; shown instead of STALLED (status ``error``).

    Returns:
        ``{"status": "never"|"ok"|"error"|"stalled", "stalled": bool, "text": str}``
        plus the liveness keys (``lastCheckedAt``, ``checkCount``, ``lastError``,
        ``consecutiveErrors``, ``lastFiredAt``, ``fireCount``). STALLED means enabled,
        owned, running, and the last check is more than three intervals (plus ``slack``) old.
    """
    live = dict(liveness or {})
    view: dict[str, Any] = {
        "lastCheckedAt": live.get("lastCheckedAt"),
        "checkCount": int(live.get("checkCount") or 0),
        "lastError": live.get("lastError"),
        "consecutiveErrors": int(live.get("consecutiveErrors") or 0),
        "lastFiredAt": live.get("lastFiredAt"),
        "fireCount": int(live.get("fireCount") or 0),
        "stalled": False,
    }
    last = view["lastCheckedAt"]
    count = view["checkCount"]
    if write_error and running:
        since = write_error.get("since")
        ago = f" for {durations.ago(now - float(since))}" if isinstance(since, int | float) \
            else ""
        view.update(status="error", writeError=write_error.get("error"),
                    text=f"error: cannot write state{ago}: {write_error.get('error')} "
                    "(checks go on; what is shown here is from before)")
        return view
    if not count or last is None:
        view.update(status="never", text="never polled")
        return view
    ago = durations.ago(now - float(last))
    interval = monitor.source.interval
    if (
        monitor.active
        and owned
        and running
        and isinstance(interval, int | float)
        and now - float(last) > 3 * float(interval) + slack
    ):
        view.update(status="stalled", stalled=True, text=f"STALLED · last poll {ago} ago")
        return view
    if view["consecutiveErrors"]:
        view.update(status="error", text=f"checked {count}x · error: {view['lastError']}")
        return view
    if view["fireCount"] and view["lastFiredAt"] is not None:
        fired = durations.ago(now - float(view["lastFiredAt"]))
        tail = f"fired {view['fireCount']}x, last {fired} ago"
    else:
        mode = monitor.condition.get("mode", "on-change")
        tail = {"match": "no match yet", "every": "not fired yet"}.get(mode, "no change yet")
    view.update(status="ok", text=f"checked {count}x · last {ago} ago · {tail}")
    return view
