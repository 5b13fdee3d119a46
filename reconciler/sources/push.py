"""What push sources (``ws``, ``webhook``) share: validated, not evaluated yet.

They are pushed (a frame, a signed delivery) and will be delivered by the
daemon's receiver once it exists; until then lint warns (``check``), and the
engine and ``monitors test`` say so and skip them (``not_evaluated``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation, Severity

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext


def not_evaluated(monitor: Monitor) -> str:
    """The one line the engine and ``monitors test`` print for a push source."""
    return (f"{monitor.source_type} sources are validated but not evaluated yet "
            "(push delivery is not built); skipped")


def check(kind: str) -> list[Finding]:
    """The lint warning (rule ``not-evaluated``) every push source of type ``kind`` gets."""
    return [Finding(("source", "type"),
                    f"{kind} is a push source: validated, but the daemon does not evaluate "
                    "push sources yet (it will skip this monitor)",
                    "not-evaluated", Severity.WARNING)]


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Always raises: push sources cannot be polled.

    Raises:
        errors.SourceError: kind ``unsupported``, permanent.
    """
    raise errors.SourceError(not_evaluated(monitor), kind="unsupported", permanent=True)
