"""The heap scheduler: order, cancel, replace, and re-arming after a wake-up."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.daemon.scheduler import Scheduler
from tests.helpers import FakeClock


def test_order_cancel_replace() -> None:
    async def go() -> list[str]:
        loop = asyncio.get_running_loop()
        seen: list[str] = []
        done = asyncio.Event()

        def cb(key: str, due: float) -> None:
            seen.append(key)
            if key == "last":
                done.set()

        s: Scheduler[str] = Scheduler(cb)
        now = loop.time()
        s.schedule("c", now + 0.06)
        s.schedule("a", now + 0.02)
        s.schedule("b", now + 0.04)
        s.schedule("gone", now + 0.01)
        s.cancel("gone")
        s.schedule("moved", now + 0.005)
        s.schedule("moved", now + 0.05)  # replaces the earlier time
        s.schedule("last", now + 0.08)
        await asyncio.wait_for(done.wait(), 5)
        return seen

    assert asyncio.run(go()) == ["a", "b", "moved", "c", "last"]


def test_rescheduling_in_callback_does_not_delay_earlier_keys() -> None:
    """Regression: a callback scheduling a later time used to leave the timer armed for
    it, so a key due in between waited a whole interval."""

    async def go() -> float:
        loop = asyncio.get_running_loop()
        fired: dict[str, float] = {}
        done = asyncio.Event()

        def cb(key: str, due: float) -> None:
            fired[key] = loop.time() - due
            if key == "first":
                s.schedule("first", due + 5.0)  # the next interval, far away
            else:
                done.set()

        s: Scheduler[str] = Scheduler(cb)
        now = loop.time()
        s.schedule("first", now + 0.01)
        s.schedule("second", now + 0.05)
        await asyncio.wait_for(done.wait(), 5)
        s.close()
        return fired["second"]

    assert asyncio.run(go()) < 0.5


def test_scheduler_runs_on_the_injected_clock() -> None:
    """Due times are the clock's: a key due in 30 s fires when the (fake) clock says so,
    not after 30 real seconds, and not a moment before."""

    async def go() -> list[tuple[str, float]]:
        clock = FakeClock()
        seen: list[tuple[str, float]] = []
        s: Scheduler[str] = Scheduler(lambda key, due: seen.append((key, clock.monotonic())),
                                      clock=clock)
        start = clock.monotonic()
        s.schedule("late", start + 30.0)
        s.schedule("soon", start + 1.0)
        await clock.advance(0.999)
        assert seen == []
        await clock.advance(0.001)
        assert seen == [("soon", start + 1.0)]
        await clock.advance(28.9)
        assert [k for k, _ in seen] == ["soon"]
        await clock.advance(0.2)
        s.close()
        return [(k, t - start) for k, t in seen]

    assert asyncio.run(asyncio.wait_for(go(), 5)) == [("soon", 1.0), ("late", 30.0)]


def test_lanes_fire_in_due_order_with_the_heap() -> None:
    """A lane takes times in order; an earlier time than its last goes to the heap; keys
    fire in due order whichever holds them, and a lane reschedule keeps it."""

    async def go() -> list[str]:
        clock = FakeClock()
        seen: list[str] = []
        s: Scheduler[str] = Scheduler(lambda key, due: seen.append(key), clock=clock)
        t = clock.monotonic()
        s.schedule("a1", t + 1.0, 1.0)
        s.schedule("a3", t + 3.0, 1.0)
        s.schedule("a2", t + 2.0, 1.0)  # earlier than the lane's last: the heap
        s.schedule("h", t + 2.5)
        s.schedule("b", t + 0.5, 5.0)
        s.schedule("a1", t + 3.5, 1.0)  # replaces a1's time
        s.cancel("h")
        await clock.advance(10.0)
        assert len(s) == 0
        s.close()
        return seen

    assert asyncio.run(asyncio.wait_for(go(), 5)) == ["b", "a2", "a3", "a1"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40),
                          st.sampled_from([None, 1.0, 2.5]), st.booleans()), max_size=40))
def test_lanes_never_change_the_order_keys_fire_in(ops: list[tuple[int, int, float | None, bool]]
                                                  ) -> None:
    """Any mix of heap and lane schedules, replacements and cancels fires the live keys in
    (due, order scheduled) order, as a plain heap would; rescheduling each key one step
    on inside the callback does the same again."""

    async def go() -> tuple[list[int], list[int], list[int], list[int]]:
        clock = FakeClock(start=0.0)
        seen: list[int] = []
        step = [0.0]

        def cb(key: int, due: float) -> None:
            seen.append(key)
            if step[0]:
                s.schedule(key, due + step[0], lanes[key])

        s: Scheduler[int] = Scheduler(cb, clock=clock)
        model: dict[int, tuple[float, int]] = {}
        lanes: dict[int, float | None] = {}
        for seq, (key, due, lane, cancel) in enumerate(ops):
            if cancel:
                s.cancel(key)
                model.pop(key, None)
            else:
                s.schedule(key, due / 2, lane)
                model[key] = (due / 2, seq)
                lanes[key] = lane
        expected = sorted(model, key=lambda k: model[k])
        clock.now = 100.0
        step[0] = 200.0
        s._fire()
        first = list(seen)
        seen.clear()
        step[0] = 0.0
        clock.now = 1000.0
        s._fire()
        s.close()
        return first, expected, seen, expected

    first, expected, second, expected_again = asyncio.run(go())
    assert first == expected
    assert second == expected_again
