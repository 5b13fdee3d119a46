"""Versioned on-disk records: their shapes, format versions and the checked reader.

Every record is a JSON object with an integer ``version``. Reading one gives a
``Loaded`` result instead of raising for what a user or a crash can cause:

* ``missing``: no file (a fresh monitor);
* ``ok``: parsed, version known;
* ``future``: written by a newer version of monitors: kept untouched and reported;
  the monitor it belongs to is not run;
* ``corrupt``: not JSON, not an object, or a bad version: moved aside to
  ``<file>.corrupt-<UTC yyyymmddTHHMMSS>`` (kept, never deleted) and reported; the
  caller starts fresh.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from reconciler import atomic, errors

STATE_VERSION = 1
LIVENESS_VERSION = 1
LIVENESS_ALL_VERSION = 1
FIRE_VERSION = 1
AUTOPAUSE_VERSION = 1
MARKER_VERSION = 1
DROUGHT_VERSION = 1
STOPPED_VERSION = 1

CORRUPT_INFIX = ".corrupt-"


class StateRecord(TypedDict, total=False):
    """``state.json``: the condition state of one monitor (written on baseline or fire).

    ``fingerprint``, ``mode`` and the condition keys come from ``conditions.decide``
    (``baseline``, ``lastSignature``, ``matching``); the evaluator adds the fire
    bookkeeping (``lastEventId``, ``lastFiredAt``, ``updatedAt``).
    """

    version: int
    fingerprint: str
    mode: str
    baseline: str | None
    lastSignature: str | None
    matching: bool
    lastEventId: str | None
    lastFiredAt: str | None
    updatedAt: str


class Stopped(TypedDict, total=False):
    """``stopped.json``: why a monitor was stopped (``monitor_stop``; ``at``: ISO-8601
    UTC; ``by``: ``mcp:<client name>`` or ``cli``; ``action``: ``removed`` its file or
    ``paused`` a built-in)."""

    version: int
    reason: str
    at: str
    by: str
    action: str


class Liveness(TypedDict, total=False):
    """``liveness.json``: the heartbeat (times are Unix seconds, floats)."""

    version: int
    lastCheckedAt: float | None
    checkCount: int
    lastError: str | None
    consecutiveErrors: int
    lastFiredAt: float | None
    fireCount: int


class LivenessAll(TypedDict, total=False):
    """``<state>/liveness.json``: every monitor's heartbeat in one file, rewritten by
    each liveness flush (``monitors``: name -> ``Liveness``)."""

    version: int
    monitors: dict[str, Liveness]


class FireRecord(TypedDict, total=False):
    """``fires/<id>/event.json``: one fire.

    ``event`` is ``events.Event.to_json()``; ``state`` is the condition state this
    fire commits (``state.json`` is rolled forward from it after a crash between
    the two writes). Actions add their own fields (``actions.records``).
    """

    version: int
    id: str
    monitor: str
    status: str
    attempts: int
    reasons: list[str]
    createdAt: str
    updatedAt: str
    event: dict[str, Any]
    state: dict[str, Any]
    # added by actions (``actions.records``; all optional)
    action: str
    reason: str
    dispatchedAt: str
    finishedAt: str
    exitCode: int | None
    durationSeconds: float
    output: str
    outputBytes: int
    outputTruncated: bool
    httpStatus: int | None
    channels: list[Any]
    command: str
    argv0: str
    queuedBehind: str
    recovered: bool
    signed: bool
    body: str


class AutoPause(TypedDict, total=False):
    """``autopause.json``: a rate-limit auto-pause (``at``: ISO-8601 UTC)."""

    version: int
    reason: str
    at: str


class PidMarker(TypedDict, total=False):
    """``pid-marker.json``: a pid source's pid was seen running once (``seenRunningAt``:
    ISO-8601 UTC; ``startTime``: clock ticks since boot, when known)."""

    version: int
    pid: int
    seenRunningAt: str
    startTime: int


class DroughtMark(TypedDict):
    """One drought the owner has been told about: since when (ISO-8601 UTC) and the
    streak of failures then."""

    since: str
    count: int


class Drought(TypedDict, total=False):
    """``drought.json``: which droughts (failed ``checks``, failed ``fires``) the owner
    has been told about (``actions.guards``); absent keys: none."""

    version: int
    checks: DroughtMark
    fires: DroughtMark


class FireTally(TypedDict):
    """Fires counted from the fire records (``Store.fire_tally``)."""

    fireCount: int
    lastFiredAt: float | None


class Status(enum.StrEnum):
    """Outcome of reading a record."""

    MISSING = "missing"
    OK = "ok"
    FUTURE = "future"
    CORRUPT = "corrupt"


@dataclass(frozen=True, slots=True)
class Loaded:
    """A checked read.

    Attributes:
        status: see ``Status``.
        data: the record when ``ok`` (or ``future``: the raw object, for display).
        problem: one line for ``future`` and ``corrupt`` (names the file).
        moved_to: where a corrupt record was moved.
    """

    status: Status
    data: dict[str, Any] | None = None
    problem: str | None = None
    moved_to: Path | None = None


class FutureVersionError(errors.StateError):
    """A record was written by a newer version of monitors; it is kept and not used."""


def utc_stamp(now: float | None = None) -> str:
    """``yyyymmddTHHMMSS`` in UTC (for quarantine file names)."""
    when = dt.datetime.fromtimestamp(now, dt.UTC) if now is not None else dt.datetime.now(dt.UTC)
    return when.strftime("%Y%m%dT%H%M%S")


def quarantine(path: Path, *, now: float | None = None) -> Path:
    """Move ``path`` aside to ``<path>.corrupt-<stamp>`` (a new name if taken) and
    return the new path. The move is a rename in the same directory, then fsynced.

    Raises:
        OSError: the rename failed.
    """
    stamp = utc_stamp(now)
    target = path.with_name(f"{path.name}{CORRUPT_INFIX}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{CORRUPT_INFIX}{stamp}-{n}")
    os.replace(path, target)
    with contextlib.suppress(OSError):
        atomic.fsync_dir(path.parent)
    return target


def read(path: Path, *, supported: int, move_corrupt: bool = True) -> Loaded:
    """Read and check the record at ``path`` (see the module docstring).

    Args:
        supported: the highest format version this code reads.
        move_corrupt: move a corrupt record aside (False: report it, touch nothing).

    Raises:
        OSError: the file exists but cannot be read (permissions, I/O error), or a
            corrupt file cannot be moved aside.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Loaded(Status.MISSING)
    problem: str | None = None
    data: Any = None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        problem = f"not valid JSON ({e})"
    if problem is None:
        if not isinstance(data, dict):
            problem = "not a JSON object"
        else:
            version = data.get("version")
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                problem = f"bad or missing format version {version!r}"
            elif version > supported:
                return Loaded(
                    Status.FUTURE,
                    data=data,
                    problem=(
                        f"{path}: format version {version} is newer than this version of "
                        f"monitors reads ({supported}); kept untouched, not run (upgrade monitors)"
                    ),
                )
            else:
                return Loaded(Status.OK, data=data)
    if not move_corrupt:
        return Loaded(Status.CORRUPT, problem=f"{path}: corrupt record ({problem})")
    moved = quarantine(path)
    return Loaded(
        Status.CORRUPT,
        problem=f"{path}: corrupt record ({problem}); moved aside to {moved.name}, starting fresh",
        moved_to=moved,
    )
