"""Liveness: the coalesced heartbeat of every check, and how ``list``/``view`` show it.

``record_check`` and ``record_fire`` change memory only; ``flush`` later writes each
changed monitor's ``liveness.json`` once (atomic, not fsynced: a heartbeat lost to a
power cut costs nothing), so a poll costs O(1) bytes and many polls of one monitor
between flushes cost one small write (DESIGN.md §4). A ``liveness.json`` of a newer
format version is never overwritten. Durable records live elsewhere (``store``,
``fires``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from reconciler import atomic, durations
from reconciler.conditions import registry as condition_registry
from reconciler.model import Monitor
from reconciler.sources import registry as source_types
from reconciler.state import records
from reconciler.state.layout import LIVENESS_FILE, StoreBase

LIVENESS_FLUSH_INTERVAL = 5.0
"""Seconds between liveness flushes in the daemon; ``liveness_view`` allows this
much extra age before calling a monitor STALLED."""


class LivenessLog(StoreBase):
    """The liveness part of ``store.Store`` (see the module docstring); thread-safe."""

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        super().__init__(state_dir, readonly=readonly)
        self._liveness: dict[str, records.Liveness] = {}
        self._dirty: set[str] = set()
        self._frozen: set[str] = set()  # future-version liveness: never overwritten
        self._known_dirs: dict[str, Path] = {}  # liveness flush: directories that exist

    def _cached_liveness(self, name: str) -> records.Liveness:
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

    def liveness(self, name: str) -> records.Liveness | None:
        """The monitor's liveness (``records.Liveness``; times in Unix seconds),
        pending changes included, or None when it was never checked."""
        with self._lock:
            live = self._liveness.get(name)
            if live is not None:
                return live.copy()
        loaded = self._read(self.monitor_dir(name) / LIVENESS_FILE, records.LIVENESS_VERSION)
        return cast(records.Liveness, loaded.data) if loaded.status is records.Status.OK \
            else None

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
            batch = {n: self._liveness[n].copy() for n in names}
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

    def _forget_liveness(self, name: str) -> None:
        """Drop ``name``'s in-memory liveness after writing its pending changes."""
        with self._lock:
            live = self._liveness.pop(name, None)
            dirty = name in self._dirty and name not in self._frozen
            self._dirty.discard(name)
            self._frozen.discard(name)
            self._known_dirs.pop(name, None)
        if live is not None and dirty and not self.readonly:
            try:
                path = self._ensure_dir(name, durable=False) / LIVENESS_FILE
                atomic.write_bytes(path, atomic.dumps(live), durable=False)
            except OSError:
                pass

    def _rename_liveness(self, old: str, new: str) -> None:
        """Carry the in-memory liveness of ``old`` over to ``new``. Hold ``_lock``."""
        self._known_dirs.pop(old, None)
        self._known_dirs.pop(new, None)
        if old in self._liveness:
            self._liveness[new] = self._liveness.pop(old)
        if old in self._dirty:
            self._dirty.discard(old)
            self._dirty.add(new)


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
        view.update(status="never",
                    text=source_types.waiting_text(monitor.source_type) or "never polled")
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
        tail = condition_registry.quiet(monitor.condition)
    view.update(status="ok", text=f"checked {count}x · last {ago} ago · {tail}")
    return view
