"""What push sources (``ws``, ``webhook``) share: there is nothing to poll.

A ``ws`` source is a stream (``sources.ws.stream``); a ``webhook`` monitor is
evaluated when the daemon's receiver hands it a delivery (``daemon.deliveries``).
``observe`` is what an out-of-schedule poll (``evaluate-now``, ``run --once``)
meets: a clear check error, never a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext


def nothing_to_poll(monitor: Monitor) -> str:
    """The one line an out-of-schedule poll of a push source gets."""
    return (f"{monitor.source_type} is a push source: it is evaluated when something "
            "is pushed (use `monitors test NAME --payload FILE` or `--frame TEXT`)")


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Always raises: push sources cannot be polled.

    Raises:
        errors.SourceError: kind ``unsupported``, not permanent (the monitor keeps
            receiving what is pushed).
    """
    raise errors.SourceError(nothing_to_poll(monitor), kind="unsupported")
