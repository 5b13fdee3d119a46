"""``ws`` and ``webhook``: validated in every version, not evaluated yet.

They are pushed (a frame, a signed delivery) and will be delivered by the
daemon's receiver once it exists; until then the engine says so and skips them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.sources import SourceContext


def not_evaluated(monitor: Monitor) -> str:
    """The one line the engine and ``monitors test`` print for a push source."""
    return (f"{monitor.source_type} sources are validated but not evaluated yet "
            "(push delivery is not built); skipped")


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Always raises: push sources cannot be polled.

    Raises:
        errors.SourceError: kind ``unsupported``, permanent.
    """
    raise errors.SourceError(not_evaluated(monitor), kind="unsupported", permanent=True)
