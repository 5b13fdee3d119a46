"""The heap scheduler: order, cancel, replace, and re-arming after a wake-up."""

from __future__ import annotations

import asyncio

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
