"""Admission: how many HTTP requests run on the daemon's event loop at once, and how
much of the loop's time they may take.

The HTTP server shares one event loop with the engine's polls (``server.app``). A
request's handler and its answer run between polls; a poll that falls due while the
loop is answering starts late. Two limits keep requests from pushing polls back:

* **slots**: at most ``MAX_ACTIVE`` requests run their handler and write their answer
  at once; the others wait their turn (FIFO, ``asyncio.Semaphore``). A burst of 200
  clients is then answered a few at a time, not in one long turn of the loop. A turn
  ends when the answer is handed to the connection (``server.app``), not when the
  client has read it: clients that read slowly, or never, hold no turn.
* **share**: a token bucket of CPU seconds. The bucket is charged the event loop
  thread's CPU time (``time.thread_time``: user and system) spent while at least one
  request is in its turn (from admission to its answer handed to the connection: an
  upper bound of what requests take of the loop, whatever the overlap), plus all the
  CPU time of the thread that writes large answers out (``server.sendout``: the
  kernel's copy of an answer counts), and refills at ``LOOP_SHARE`` seconds per
  second of wall time up to ``BURST`` seconds.
  A request finding the bucket empty waits, holding its slot, until it refills.
  Sustained load is thus served at about ``LOOP_SHARE`` of the loop; the rest stays
  with the polls (on a 2-core machine the waiting also leaves CPU to the polls rather
  than to the clients).

This is the classic token bucket (as in the Linux ``tbf`` queueing discipline or
Envoy's local rate limit), metered in seconds of work rather than in requests, since
a ``/metrics`` answer for 10,000 monitors costs a hundred times a ``/v1/status``.
Measured by ``bench/http_load.py`` (1,000 monitors, 200 ``ab`` clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from reconciler.daemon import clock as clock_mod

MAX_ACTIVE = 4
"""Requests whose handler and answer run on the event loop at once."""
LOOP_SHARE = 0.2
"""CPU seconds per second that sustained HTTP load may take (a fraction of a core).
The trade between polls on time and HTTP throughput, measured with
``bench/http_load.py --rounds 5`` (1,000 monitors, 200 ``ab`` clients, 2 cores,
interleaved runs): at 0.25 poll lateness p99 grew 2.13-2.21x under load and the daemon
answered 1,210-1,330 requests a second; at 0.2, 0.96-1.98x (4 runs) and 1,020-1,110 a
second beside them (16% fewer)."""
BURST = 0.05
"""CPU seconds a burst may take before the share applies (the bucket's size)."""


class Admission:
    """Slots and a loop-time budget for HTTP requests (module docstring).

    Args:
        slots: requests admitted at once (>= 1).
        share: refill rate of the budget, seconds per second (0 < share <= 1).
        burst: the budget's capacity, seconds (>= 0).
        clock: ``daemon.clock`` (``monotonic`` and ``sleep``); a fake one in tests.
        cpu: the loop thread's CPU seconds (``time.thread_time``; in tests, the fake
            clock's ``monotonic``: every second on the loop's CPU).
        also: CPU seconds spent for requests by other threads, cumulative (the sender
            thread of ``server.sendout``); charged whether or not a request is in its
            turn (that thread works after the turn). Default: none.

    Attributes:
        waited: how many requests waited for the budget to refill (a count).
    """

    def __init__(self, slots: int = MAX_ACTIVE, share: float = LOOP_SHARE,
                 burst: float = BURST, *, clock: clock_mod.Clock = clock_mod.REAL,
                 cpu: Callable[[], float] = time.thread_time,
                 also: Callable[[], float] = lambda: 0.0) -> None:
        if slots < 1 or not 0 < share <= 1 or burst < 0:
            raise ValueError(f"admission: slots {slots}, share {share}, burst {burst}")
        self._slots = asyncio.Semaphore(slots)
        self._share = share
        self._burst = burst
        self._clock = clock
        self._tokens = burst
        self._cpu = cpu
        self._also = also
        self._at = clock.monotonic()
        self._cpu_at = cpu()
        self._also_at = also()
        self._active = 0
        self.waited = 0

    def _account(self) -> None:
        """Charge the loop's CPU time since the last account if a request was in its
        turn, and refill at ``share`` per second up to ``burst``."""
        now, cpu, also = self._clock.monotonic(), self._cpu(), self._also()
        spent = (cpu - self._cpu_at if self._active else 0.0) + (also - self._also_at)
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._share - spent)
        self._at, self._cpu_at, self._also_at = now, cpu, also

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """``async with admission.turn():`` wait for a slot and for the budget, run the
        body, charging the loop's CPU time while any request was in its turn. Cancelling a
        waiter (a request timeout) gives up its place without charge."""
        async with self._slots:
            self._account()
            if self._tokens < 0:
                self.waited += 1
                while self._tokens < -1e-6:  # a microsecond short is float rounding
                    await self._clock.sleep(-self._tokens / self._share)
                    self._account()
            self._active += 1
            try:
                yield
            finally:
                self._account()
                self._active -= 1
