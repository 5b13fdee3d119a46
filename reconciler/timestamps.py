"""UTC timestamps as text: the two ISO-8601 forms monitors writes (a leaf: stdlib only).

* ``utc_micro``: ``2026-12-01T09:00:00.123456Z``, microseconds and ``Z``: every time
  in a state record (fire records, ``state.json``, auto-pause, pid marker, drought);
* ``utc_seconds``: ``2026-12-01T09:00:00+00:00``, to the second: the running
  registry (``appliedAt``, ``startedAt``) and saved plans.

Both forms are on disk and read back by older versions: they never change. This
module must not import anything from ``reconciler``.
"""

from __future__ import annotations

import datetime as dt


def _at(at: float | None) -> dt.datetime:
    return dt.datetime.now(dt.UTC) if at is None else dt.datetime.fromtimestamp(at, dt.UTC)


def utc_micro(at: float | None = None) -> str:
    """Unix seconds ``at`` (default: now) as ISO-8601 UTC with microseconds and ``Z``."""
    return _at(at).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def utc_seconds(at: float | None = None) -> str:
    """Unix seconds ``at`` (default: now) as ISO-8601 UTC to the second, ``+00:00``."""
    return _at(at).isoformat(timespec="seconds")
