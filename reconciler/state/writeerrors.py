"""Which monitors' writes into the state directory fail right now (disk full, read-only).

While the state directory cannot be written, its files cannot say so: ``liveness.json``
keeps its last good ``lastCheckedAt`` and ``list`` would read a working monitor as
STALLED. So the daemon keeps the failures in memory (this module), logs one line
when writes start failing and one when they work again (never one per write), and
reports them in its ``status`` for ``list`` and ``view`` to show instead.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

log = logging.getLogger("monitors.state")


def describe(e: OSError) -> str:
    """One line for a failed write: ``<path>: <strerror>`` (the path when known)."""
    what = e.strerror or str(e)
    return f"{e.filename}: {what}" if e.filename else what


class WriteErrors:
    """Thread-safe record of failing writes, by monitor name.

    Args:
        clock: Unix seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failing: dict[str, tuple[str, float]] = {}

    @contextlib.contextmanager
    def track(self, name: str) -> Iterator[None]:
        """Around one write of monitor ``name``: an ``OSError`` is recorded (and
        re-raised); a normal exit clears ``name``'s failure."""
        try:
            yield
        except OSError as e:
            self.failed(name, e)
            raise
        self.ok(name)

    def failed(self, name: str, e: OSError) -> None:
        """A write of ``name`` failed with ``e``; the first failure of all is logged."""
        line = describe(e)
        with self._lock:
            first = not self._failing
            since = self._failing.get(name, (line, self._clock()))[1]
            self._failing[name] = (line, since)
        if first:
            log.error("cannot write the state directory: %s (monitors keep polling and "
                      "writes are retried; `monitors list` shows which monitors)", line)

    def ok(self, name: str) -> None:
        """A write of ``name`` succeeded; when no failure is left, that is logged."""
        with self._lock:
            if self._failing.pop(name, None) is None:
                return
            cleared = not self._failing
        if cleared:
            log.info("state writes work again")

    def failed_many(self, names: Iterable[str], e: OSError) -> None:
        """A write that carried every one of ``names`` (the liveness flush's one file)
        failed with ``e``; like ``failed`` for each."""
        for name in names:
            self.failed(name, e)

    def ok_many(self, names: Iterable[str]) -> None:
        """A write that carried every one of ``names`` succeeded; like ``ok`` for each,
        but O(1) while nothing fails (the liveness flush carries every monitor)."""
        with self._lock:
            if not self._failing:
                return
            failing = [n for n in names if n in self._failing]
        for name in failing:
            self.ok(name)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{name: {"error": "<path>: <strerror>", "since": Unix seconds of the first
        failure in a row}}``, sorted by name."""
        with self._lock:
            return {n: {"error": line, "since": since}
                    for n, (line, since) in sorted(self._failing.items())}
