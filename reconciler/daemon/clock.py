"""The clock the scheduler and the evaluator read: monotonic time, Unix time, sleep.

``Clock`` is a small Protocol so tests can drive time (a fake clock that advances
only when told) instead of sleeping through intervals; ``REAL`` is the real one and
the default everywhere. Monotonic time is ``time.monotonic``, the clock asyncio's
event loop uses on this platform, so due times compare with ``loop.time()``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """What timing logic reads (seconds, floats)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (due times, intervals)."""
        ...

    def time(self) -> float:
        """Unix time in seconds (timestamps written to state, events and liveness)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return after ``seconds`` of this clock's time (cancellable)."""
        ...


class RealClock:
    """The real clocks: ``time.monotonic``, ``time.time`` and ``asyncio.sleep``."""

    # The C functions themselves (read a few times per poll: no Python frame between).
    monotonic = staticmethod(time.monotonic)
    """``time.monotonic()``."""
    time = staticmethod(time.time)
    """``time.time()``."""

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep(seconds)``."""
        await asyncio.sleep(seconds)


REAL: Clock = RealClock()
"""The default clock of the scheduler and the evaluator."""
