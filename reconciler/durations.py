"""Durations: "500ms", "30s", "5m", "8h", "1d" or integer seconds <-> float seconds.

The accepted grammar is one integer followed by an optional unit (``ms``, ``s``,
``m``, ``h``, ``d``, ``w``); a bare integer (YAML int or digit string) is seconds.
Compound forms (``1h30m``) are accepted too, as in Go's ``time.ParseDuration``.

Bounds live here, and only here, so the CLI and the files agree: no duration is
longer than ``MAX_SECONDS`` (3650d, about ten years) and no point in time (a
pause's ``until``) is later than ``LATEST`` or earlier than ``EARLIEST``. Past them,
timers, socket timeouts and date arithmetic overflow (``OverflowError``) long before
anyone could mean it.
"""

from __future__ import annotations

import datetime as dt
import re

_UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d|w))+")

MIN_INTERVAL = 0.5
MAX_INTERVAL = 7 * 86400.0
MAX_SECONDS = 3650 * 86400.0
"""The longest duration accepted anywhere (``3650d``): flags and files alike."""
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)
"""The latest point in time accepted anywhere (a pause's ``until``)."""
EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""The earliest point in time accepted anywhere (the Unix epoch): before it, converting
a time near year 1 to UTC leaves the calendar (``ValueError: year 0 is out of range``)."""
_MAX_DIGITS = 20  # more digits than any duration under MAX_SECONDS in ms
_PARSED: dict[str, float] = {}  # text -> seconds: the same few ("30s", "5m") recur per load


class OutOfRange(ValueError):
    """A well-formed duration or time past its bound (``MAX_SECONDS``, ``LATEST``,
    ``EARLIEST``)."""


def parse(value: object) -> float:
    """Return the duration ``value`` in seconds (float).

    Args:
        value: an ``int`` (seconds), or a string such as ``"30s"``, ``"1h30m"``,
            ``"500ms"`` or ``"45"``. ``bool`` and floats are refused (YAML ``1.5``
            is ambiguous between units; write ``1500ms``).

    Raises:
        OutOfRange: longer than ``MAX_SECONDS`` (a ``ValueError``).
        ValueError: with a message fit for a ``field: message`` problem line.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        return _bounded(value, value)
    if isinstance(value, str):
        known = _PARSED.get(value)
        if known is not None:
            return known
        text = value.strip()
        seconds: float | None = None
        if text.isascii() and text.isdigit():
            seconds = _bounded(_int(text, value), value)
        elif _WHOLE.fullmatch(text):
            seconds = _bounded(sum(_int(n, value) * _UNITS[u] for n, u in _PART.findall(text)),
                               value)
        if seconds is not None:
            if len(_PARSED) < 1024 and len(value) <= 32:
                _PARSED[value] = seconds
            return seconds
    raise ValueError(
        f"expected a duration such as 500ms, 30s, 5m, 8h or 1d, got {value!r}"
    )


def _int(digits: str, value: object) -> int:
    # int() of thousands of digits is refused by Python itself (and slow): over the bound anyway
    if len(digits.lstrip("0")) > _MAX_DIGITS:
        raise OutOfRange(too_long(value))
    return int(digits)


def _bounded(seconds: float, value: object) -> float:
    if seconds > MAX_SECONDS:
        raise OutOfRange(too_long(value))
    return float(seconds)


def too_long(value: object) -> str:
    """The message for a duration past ``MAX_SECONDS``: ``'3000000w' is longer than
    3650d, the longest duration accepted``."""
    text = value if isinstance(value, str) else str(value)
    shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "..."
    return f"{shown} is longer than {format(MAX_SECONDS)}, the longest duration accepted"


def check_time(moment: dt.datetime, text: str) -> dt.datetime:
    """Return the aware ``moment`` (written ``text``) in UTC, when between ``EARLIEST``
    and ``LATEST``.

    Raises:
        OutOfRange: later than ``LATEST`` or earlier than ``EARLIEST``, also when too
            close to either end of the calendar to convert to UTC at all
            (``9999-12-31T23:59:59-12:00``, ``0001-01-01T00:00:00+14:00``).
    """
    try:
        utc: dt.datetime | None = moment.astimezone(dt.UTC)
    except (OverflowError, ValueError):  # past year 9999 or before year 1 once in UTC
        utc = None
    late = utc > LATEST if utc is not None else moment.year > 5000
    early = utc < EARLIEST if utc is not None else moment.year <= 5000
    if late:
        raise OutOfRange(f"{text!r} is later than {LATEST.isoformat().replace('+00:00', 'Z')}, "
                         "the latest time accepted")
    if early or utc is None:
        raise OutOfRange(f"{text!r} is earlier than "
                         f"{EARLIEST.isoformat().replace('+00:00', 'Z')}, the earliest time "
                         "accepted")
    return utc


def format(seconds: float) -> str:
    """Render ``seconds`` in the largest whole unit: ``90.0`` -> ``"90s"``, ``3600`` -> ``"1h"``."""
    if seconds < 1 and seconds > 0:
        return f"{round(seconds * 1000)}ms"
    for unit in ("w", "d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def ago(seconds: float) -> str:
    """Human age such as ``12s``, ``4m``, ``2h``, ``3d`` (rounded down) for liveness lines."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"
