"""Liveness: the coalesced heartbeat of every check, and how ``list``/``view`` show it.

``record_check`` and ``record_fire`` change memory only. ``flush`` later writes one
file for all monitors, ``<state>/liveness.json`` (``records.LivenessAll``: every
heartbeat this process holds, plus those it read at start for monitors it does not
run), atomic and not fsynced: a heartbeat lost to a power cut costs nothing. So a
poll costs O(1) bytes in memory and a flush one write, whatever the number of
monitors (a file per monitor per flush cost about 220 us of CPU each: 44% of a core
for 10,000 monitors at a 5 s flush). A monitor's own ``monitors/<name>/liveness.json``
is written on its first check (``flush_files``: ``list`` right after ``apply``) and by
the flush after its error line changed, so the file beside its state tells whether it
fails. Readers take the newer of the two (``newest``). A liveness file of a newer
format version is never overwritten (a newer aggregate: each flush writes per-monitor
files instead, as before the aggregate existed). Flushes run one at a time
(``_flush_lock``), so a slower, older snapshot never replaces a newer one.
Durable records live elsewhere (``store``, ``fires``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from reconciler import atomic
from reconciler.state import records
from reconciler.state.layout import LIVENESS_ALL_FILE, LIVENESS_FILE, StoreBase, file_sig

LIVENESS_FLUSH_INTERVAL = 5.0
"""Seconds between liveness flushes in the daemon; ``liveness_view`` allows this
much extra age before calling a monitor STALLED."""

ENCODE_CHUNK = 256
"""Heartbeats JSON-encoded per ``flush_encode`` call (about half a millisecond): the
daemon encodes on its event loop a slice at a time, so polls run in between."""


def newest(*candidates: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The most recent of liveness records (by ``lastCheckedAt``, then ``checkCount``,
    then ``lastFiredAt``), as a new dict; None when all are None."""
    best: Mapping[str, Any] | None = None
    best_key = (-1.0, -1, -1.0)
    for live in candidates:
        if live is None:
            continue
        key = (float(live.get("lastCheckedAt") or 0.0), int(live.get("checkCount") or 0),
               float(live.get("lastFiredAt") or 0.0))
        if key > best_key:
            best, best_key = live, key
    return dict(best) if best is not None else None


@dataclass(slots=True)
class Flush:
    """One liveness flush under way (``LivenessLog.flush_begin``).

    Attributes:
        seq: its order among flushes begun (a newer aggregate is never replaced).
        dirty: monitors whose heartbeat changed since the previous flush.
        files: monitors whose own liveness.json is due.
        own: the records those files get.
        names: the monitors the aggregate holds (None: the aggregate is of a newer
            format version and not written).
        parts: the aggregate's JSON encoded so far; ``done``: names encoded.
    """

    seq: int
    dirty: set[str]
    files: set[str]
    own: dict[str, records.Liveness]
    names: list[str] | None
    parts: list[str] = field(default_factory=list)
    done: int = 0


def fresh(base: Mapping[str, Any] | None) -> records.Liveness:
    """A liveness record of the current version with the fields of ``base`` (any shape
    read from disk: missing counts are 0, missing times None)."""
    base = base or {}
    return {
        "version": records.LIVENESS_VERSION,
        "lastCheckedAt": base.get("lastCheckedAt"),
        "checkCount": int(base.get("checkCount") or 0),
        "lastError": base.get("lastError"),
        "consecutiveErrors": int(base.get("consecutiveErrors") or 0),
        "lastFiredAt": base.get("lastFiredAt"),
        "fireCount": int(base.get("fireCount") or 0),
    }


class LivenessLog(StoreBase):
    """The liveness part of ``store.Store`` (see the module docstring); thread-safe."""

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        super().__init__(state_dir, readonly=readonly)
        self._liveness: dict[str, records.Liveness] = {}
        self._dirty: set[str] = set()  # changed since the last aggregate write
        self._files: set[str] = set()  # own liveness.json due (error line changed)
        self._frozen: set[str] = set()  # future-version liveness: never overwritten
        self._known_dirs: set[str] = set()  # monitors whose directory exists
        # Writer: the aggregate's entries for monitors not in memory (loaded once).
        self._carried: dict[str, records.Liveness] | None = None
        self._all_frozen = False  # future-version aggregate: never overwritten
        self._all_cache: tuple[Any, dict[str, Any]] | None = None  # reader: (sig, entries)
        self._flush_lock = threading.Lock()  # one write of a flush at a time
        self._flush_seq = 0  # flushes begun
        self._flush_written = 0  # the newest flush whose aggregate was written

    # -- reading --------------------------------------------------------------

    def _aggregate(self) -> dict[str, Any]:
        """The entries of ``<state>/liveness.json`` as on disk (re-read when the file
        changed; corrupt: moved aside when writable, read as empty)."""
        path = self.root / LIVENESS_ALL_FILE
        sig = file_sig(path)
        cached = self._all_cache
        if cached is not None and cached[0] == sig:
            return cached[1]
        entries: dict[str, Any] = {}
        if sig is not None:
            loaded = self._read(path, records.LIVENESS_ALL_VERSION)
            if loaded.status is records.Status.FUTURE:
                self._all_frozen = True
            monitors = (loaded.data or {}).get("monitors") \
                if loaded.status is records.Status.OK else None
            if isinstance(monitors, dict):
                entries = {n: v for n, v in monitors.items() if isinstance(v, dict)}
        self._all_cache = (sig, entries)
        return entries

    def _carried_entries(self) -> dict[str, records.Liveness]:
        """Writer: the aggregate's heartbeats not (yet) in memory, loaded on first use;
        entries whose monitor directory is gone (deleted: a fresh start) are dropped.
        Hold ``_lock``."""
        if self._carried is None:
            self._carried = {n: cast(records.Liveness, v) for n, v in self._aggregate().items()
                             if os.path.isdir(self.monitor_dir(n))}
            self._all_cache = None
        return self._carried

    def _own_file(self, name: str) -> tuple[dict[str, Any] | None, bool]:
        """(the monitor's own liveness.json when readable, True when it is of a newer
        format version)."""
        loaded = self._read(self.monitor_dir(name) / LIVENESS_FILE, records.LIVENESS_VERSION)
        data = loaded.data if loaded.status is records.Status.OK else None
        return data, loaded.status is records.Status.FUTURE

    def _cached_liveness(self, name: str) -> records.Liveness:
        """The in-memory liveness of ``name`` (loaded from disk once). Hold ``_lock``."""
        live = self._liveness.get(name)
        if live is None:
            own, future = self._own_file(name)
            if future:
                self._frozen.add(name)
            carried = self._carried_entries().pop(name, None) if not self.readonly else None
            live = self._liveness[name] = fresh(newest(own, carried))
        return live

    def liveness(self, name: str) -> records.Liveness | None:
        """The monitor's liveness (``records.Liveness``; times in Unix seconds),
        pending changes included, or None when it was never checked (or its state
        directory was deleted)."""
        with self._lock:
            live = self._liveness.get(name)
            if live is not None:
                return live.copy()
        own, _ = self._own_file(name)
        if own is None and not os.path.isdir(self.monitor_dir(name)):
            return None
        with self._lock:
            other = self._carried_entries().get(name) if not self.readonly \
                else self._aggregate().get(name)
        return cast(records.Liveness | None, newest(own, other))

    def failing(self) -> set[str]:
        """Names whose last checks failed (``consecutiveErrors`` > 0), among the monitors
        checked or asked about (``last_check``) since this process started: in memory,
        no copy and no read (``/metrics`` counts monitors by state with it)."""
        with self._lock:
            return {name for name, live in self._liveness.items()
                    if live["consecutiveErrors"]}

    # -- counting -------------------------------------------------------------

    def last_check(self, name: str) -> tuple[float | None, str | None]:
        """``(lastCheckedAt, lastError)`` of ``name`` (Unix seconds; None, None when never
        checked). Loads the record into the cache ``record_check`` uses, so asking at
        start costs no extra read."""
        with self._lock:
            live = self._cached_liveness(name)
            return live["lastCheckedAt"], live["lastError"]

    def record_check(self, name: str, *, ok: bool, error: str | None, at: float) -> None:
        """Count one check (memory only; ``flush`` writes it).

        Args:
            ok: the source produced an observation.
            error: the check error's one line when not ``ok``.
            at: Unix seconds of the check.
        """
        with self._lock:
            live = self._liveness.get(name)
            if live is None:
                live = self._cached_liveness(name)
            live["lastCheckedAt"] = at
            live["checkCount"] += 1
            if ok:
                if live["consecutiveErrors"]:
                    live["consecutiveErrors"] = 0
                    live["lastError"] = None
                    self._files.add(name)
            else:
                line = error or "error"
                live["consecutiveErrors"] += 1
                if live["lastError"] != line:
                    live["lastError"] = line
                    self._files.add(name)
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
            return len(self._dirty | self._files)

    # -- writing --------------------------------------------------------------

    def flush(self) -> int:
        """Write what changed since the last flush: the aggregate ``<state>/liveness.json``
        (atomic, not fsynced) and the own ``liveness.json`` of monitors whose error
        line changed; return how many monitors' changes were written.

        ``flush_begin``, ``flush_encode`` over every slice, then ``flush_finish``; the
        daemon runs the first two on its event loop a slice at a time (so a flush
        never holds the loop, or the lock ``record_check`` takes, for more than a
        slice) and only the write in a worker thread.

        A write that fails stays pending and is retried by the next flush; its
        monitors are reported in ``write_errors`` until a write of theirs succeeds.
        """
        batch = self.flush_begin()
        if batch is None:
            return 0
        while self.flush_encode(batch):
            pass
        return self.flush_finish(batch)

    def flush_begin(self) -> Flush | None:
        """Start a flush: take what changed (None when nothing did, or read-only)."""
        if self.readonly:
            return None
        with self._lock:
            carried = self._carried_entries()
            dirty = self._dirty - self._frozen
            files = self._files - self._frozen
            self._dirty.clear()
            self._files.clear()
            if not dirty and not files:
                return None
            if self._all_frozen:
                files |= dirty
                names: list[str] | None = None
            else:
                names = [n for n in self._liveness if n not in self._frozen]
                names += [n for n in carried if n not in self._liveness]
            own = {n: (self._liveness.get(n) or carried[n]).copy() for n in files
                   if n in self._liveness or n in carried}
            self._flush_seq += 1
            return Flush(self._flush_seq, dirty, files, own, names)

    def flush_encode(self, batch: Flush, size: int = ENCODE_CHUNK) -> bool:
        """Encode the aggregate's next ``size`` heartbeats (as they are now); True while
        some are left. Cheap enough to run on the event loop between polls."""
        names = batch.names
        if names is None or batch.done >= len(names):
            return False
        chunk = names[batch.done:batch.done + size]
        with self._lock:
            carried = self._carried_entries()
            entries = {}
            for name in chunk:
                live = self._liveness.get(name) or carried.get(name)
                if live is not None:
                    entries[name] = live.copy()
        if entries:
            batch.parts.append(json.dumps(entries, separators=(",", ":"))[1:-1])
        batch.done += len(chunk)
        return batch.done < len(names)

    def flush_finish(self, batch: Flush) -> int:
        """Write what ``batch`` took (worker thread); see ``flush``. An aggregate older
        than one already written (flushes that overlapped) is not written: the newer
        one holds every heartbeat too."""
        dirty, files = batch.dirty, batch.files
        with self._flush_lock:
            failed = self._ensure_dirs(dirty)
            if batch.names is not None and batch.seq > self._flush_written:
                while self.flush_encode(batch):  # what the caller left to encode
                    pass
                body = ",".join(batch.parts)
                data = (f'{{"version":{records.LIVENESS_ALL_VERSION},"monitors":{{{body}}}}}'
                        "\n").encode()
                try:
                    self._ensure_root()
                    atomic.write_bytes(self.root / LIVENESS_ALL_FILE, data, durable=False)
                    self._flush_written = batch.seq
                    self._writes.ok_many(dirty - failed)
                except OSError as e:
                    self._writes.failed_many(sorted(dirty - failed), e)
                    failed |= dirty
            failed |= self._write_files(batch.own)
        if failed:
            with self._lock:
                self._dirty.update(failed & dirty)
                self._files.update(failed & files)
        return len(dirty | files) - len(failed)

    def flush_files(self, names: Iterable[str]) -> int:
        """Write the own ``liveness.json`` of each of ``names`` now (atomic, not
        fsynced): a first check (``list`` right after ``apply``) or a one-off poll.
        Returns how many were written; a failed one is written by a later flush."""
        if self.readonly:
            return 0
        with self._flush_lock:
            with self._lock:
                batch = {n: self._liveness[n].copy() for n in names
                         if n in self._liveness and n not in self._frozen}
            failed = self._write_files(batch)
        if failed:
            with self._lock:
                self._files.update(failed)
        return len(batch) - len(failed)

    def _ensure_dirs(self, names: Iterable[str]) -> set[str]:
        """Create the missing directories of ``names`` (a monitor in the aggregate has
        one: deleting it is how a monitor starts afresh); return those that failed."""
        failed: set[str] = set()
        for name in names:
            if name in self._known_dirs:
                continue
            try:
                with self._writes.track(name):
                    self._ensure_dir(name, durable=False)
                self._known_dirs.add(name)
            except OSError:
                failed.add(name)
        return failed

    def _write_files(self, batch: Mapping[str, records.Liveness]) -> set[str]:
        """Write each monitor's own liveness.json; return the names that failed."""
        failed: set[str] = set()
        for name, live in batch.items():
            try:
                with self._writes.track(name):
                    directory = self.monitor_dir(name)
                    if name not in self._known_dirs:
                        self._ensure_dir(name, durable=False)
                        self._known_dirs.add(name)
                    data = json.dumps(live, separators=(",", ":")).encode()
                    atomic.write_bytes(directory / LIVENESS_FILE, data, durable=False)
            except OSError:
                self._known_dirs.discard(name)
                failed.add(name)
        return failed

    def _forget_liveness(self, name: str) -> None:
        """Drop ``name``'s in-memory liveness; the aggregate keeps carrying it (the next
        flush writes pending changes)."""
        with self._lock:
            live = self._liveness.pop(name, None)
            if live is not None and name not in self._frozen:
                self._carried_entries()[name] = live
            self._frozen.discard(name)
            self._known_dirs.discard(name)

    def _rename_liveness(self, old: str, new: str) -> None:
        """Carry the in-memory liveness of ``old`` over to ``new``. Hold ``_lock``."""
        self._known_dirs.discard(old)
        self._known_dirs.discard(new)
        carried = self._carried_entries()
        carried.pop(new, None)
        if old in self._liveness:
            self._liveness[new] = self._liveness.pop(old)
        if old in carried:
            carried[new] = carried.pop(old)
        for pending in (self._dirty, self._files):
            if old in pending:
                pending.discard(old)
                pending.add(new)
        self._dirty.add(new)
