"""What every action type module shares: its crash-recovery kind and normalizing helpers.

Stdlib and leaves only (``durations``): lint imports the type modules through
``actions.registry``.
"""

from __future__ import annotations

import enum
from typing import Any

from reconciler import durations


class Recovery(enum.StrEnum):
    """What ``actions.recovery`` does with a fire of this type found unfinished at start.

    ``RESEND``: re-sent with the same event id (at-least-once; receivers dedupe).
    ``INTERRUPT``: marked ``interrupted``, never started again (at-most-once).
    """

    RESEND = "resend"
    INTERRUPT = "interrupt"


def seconds(value: Any, default: float) -> float:
    """A duration field in seconds: ``default`` when None, a float (already normalized)
    as is, else ``durations.parse`` (``30s``, ``5m``, an integer of seconds).

    Raises:
        ValueError: the duration does not parse.
    """
    if value is None:
        return default
    if isinstance(value, float):
        return value
    return durations.parse(value)


def mapping(value: Any) -> dict[str, str]:
    """A string-to-string mapping (``env``, ``headers``), empty when None."""
    return {str(k): str(v) for k, v in (value or {}).items()}
