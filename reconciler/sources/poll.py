"""``poll``: a command re-run every interval; its stdout is the observation.

Any exit code is an observation (``exitCode``, ``duration`` in seconds,
``stderrTail`` and ``truncated`` go into meta). Failing to start or a timeout is a
check error; on timeout the whole process group is killed. See
``sources.process`` for output capping and decoding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reconciler.model import Monitor, Observation
from reconciler.sources import process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Run the command once.

    Raises:
        errors.SourceError: kind ``spawn`` or ``timeout``.
    """
    spec = monitor.source
    done = await process.run(spec, timeout=float(spec["timeout"]),
                             max_bytes=int(spec["maxBytes"]))
    return Observation(
        done.stdout,
        {
            "exitCode": done.exit_code,
            "duration": round(done.duration, 4),
            "stderrTail": done.stderr_tail,
            "truncated": done.truncated,
        },
    )
