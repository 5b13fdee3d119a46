"""Restarts keep the schedule: when a restarted monitor polls first. Pure.

Before this, every start polled at once whatever ``lastCheckedAt`` said, so an
``every`` monitor with ``interval: 1h`` restarted three times in an hour fired three
times. Now (``first_poll_delay``):

* a monitor whose last check (``liveness.json``'s ``lastCheckedAt``) is less than an
  interval old waits for the remainder of the interval, plus a small deterministic
  per-monitor jitter (``JITTER_FRACTION`` of the interval, at most ``JITTER_MAX``
  seconds) so monitors restarted together do not poll together;
* an overdue one, or one never checked, polls at once (the engine's start-up spread
  still applies): a restart never pushes a due check a whole interval away;
* a last check in the future (the wall clock went back) counts as just made.

The engine resumes only a monitor whose stored condition state belongs to its
fingerprint: a new identity needs its baseline now.
"""

from __future__ import annotations

JITTER_FRACTION = 0.05
"""The jitter is at most this fraction of the interval..."""

JITTER_MAX = 30.0
"""...and at most this many seconds."""


def first_poll_delay(last_checked_at: float | None, interval: float, now: float,
                     fraction: float) -> float | None:
    """Seconds from ``now`` until a restarted monitor's first poll, or None to poll at
    once (overdue or never checked).

    Args:
        last_checked_at: Unix seconds of the last check (``lastCheckedAt``), or None.
        interval: the source's interval in seconds.
        now: Unix seconds now (the engine's clock).
        fraction: the monitor's deterministic fraction in [0, 1) (its name's CRC-32),
            which places its jitter.
    """
    if last_checked_at is None or interval <= 0:
        return None
    age = max(0.0, now - last_checked_at)
    if age >= interval:
        return None
    return interval - age + fraction * min(interval * JITTER_FRACTION, JITTER_MAX)
