"""Durations: "500ms", "30s", "5m", "8h", "1d" or integer seconds <-> float seconds.

The accepted grammar is one integer followed by an optional unit (``ms``, ``s``,
``m``, ``h``, ``d``, ``w``); a bare integer (YAML int or digit string) is seconds.
Compound forms (``1h30m``) are accepted too, as in Go's ``time.ParseDuration``.
"""

from __future__ import annotations

import re

_UNITS: dict[str, float] = {
    "ms": 0.001,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:\d+(?:ms|s|m|h|d|w))+")

MIN_INTERVAL = 0.5
MAX_INTERVAL = 7 * 86400.0


def parse(value: object) -> float:
    """Return the duration ``value`` in seconds (float).

    Args:
        value: an ``int`` (seconds), or a string such as ``"30s"``, ``"1h30m"``,
            ``"500ms"`` or ``"45"``. ``bool`` and floats are refused (YAML ``1.5``
            is ambiguous between units; write ``1500ms``).

    Raises:
        ValueError: with a message fit for a ``field: message`` problem line.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return float(int(text))
        if _WHOLE.fullmatch(text):
            return sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
    raise ValueError(
        f"expected a duration such as 500ms, 30s, 5m, 8h or 1d, got {value!r}"
    )


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
