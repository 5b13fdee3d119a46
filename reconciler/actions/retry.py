"""The one retry policy of the deliveries (``notify`` channels and ``webhook-out``).

Exponential backoff with jitter, bounded by a number of attempts and, optionally,
by a total time; a server's ``Retry-After`` (RFC 9110 §10.2.3: delay-seconds or an
HTTP-date) is a lower bound on the next wait. Wait n (counted from 1) is
``min(cap, base * 2**(n-1))`` times a jitter factor drawn from [0.5, 1) ("equal
jitter", AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).

Pure: no I/O and no sleeping here; callers sleep for ``Policy.delay`` themselves,
so a clock and ``random`` can be injected in tests. Stdlib only.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass

RETRY_STATUSES = frozenset({408, 429})
"""HTTP statuses retried besides 5xx: Request Timeout, Too Many Requests (RFC 9110/6585)."""


def retryable_status(status: int) -> bool:
    """True for an HTTP status worth retrying: any 5xx, 408 or 429."""
    return status >= 500 or status in RETRY_STATUSES


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value, or None.

    Args:
        value: ``"120"`` (delay-seconds) or an HTTP-date such as
            ``"Wed, 21 Oct 2015 07:28:00 GMT"`` (RFC 9110 §10.2.3, §5.6.7).
        now: the current POSIX time in seconds (default: the system clock).

    Returns:
        Seconds (>= 0; a date in the past gives 0.0), or None when absent or unparsable.
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    import email.utils  # only for an HTTP-date (the email package: ~2 ms to import)

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    current = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


@dataclass(frozen=True, slots=True)
class Policy:
    """How often and how long a delivery is retried.

    Attributes:
        max_attempts: attempts at most (>= 1), the first one included.
        max_time: seconds for the whole delivery, waits included; None: unbounded
            (the attempts bound it).
        base: seconds of the first wait (before jitter).
        cap: seconds no single backoff wait exceeds (a ``Retry-After`` may).
    """

    max_attempts: int
    max_time: float | None = None
    base: float = 1.0
    cap: float = 30.0

    def delay(self, nth: int, *, hint: float | None = None,
              rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt ``nth`` (1-based) of this delivery.

        Args:
            hint: the server's ``Retry-After`` in seconds (``retry_after``), a lower bound.
            rand: a float in [0, 1) (injectable for tests).
        """
        wait = min(self.cap, self.base * 2.0 ** (nth - 1)) * (0.5 + rand() / 2)
        return wait if hint is None else max(wait, hint)

    def gives_up(self, delay: float, *, left: float | None, hint: float | None = None,
                 ) -> str | None:
        """Why waiting ``delay`` seconds would pass ``max_time`` with ``left`` seconds
        left (``Retry-After 9s`` or ``next wait 1.23s``), or None when it fits."""
        if left is None or delay < left:
            return None
        if hint is not None and hint >= delay:
            return f"Retry-After {hint:g}s"
        return f"next wait {delay:.2f}s"
