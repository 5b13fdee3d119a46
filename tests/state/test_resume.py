"""Restarts keep the schedule: the pure rule (``state.resume``) and the engine on a fake
clock, restarted over the same state directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from reconciler.daemon import evaluator
from reconciler.daemon.polls import offset_fraction
from reconciler.sources.context import SourceContext
from reconciler.state import resume
from reconciler.state import store as store_mod
from tests.factories import monitor
from tests.helpers import FakeClock, Recorder, until

HOUR = 3600.0


@pytest.mark.parametrize(("last", "now", "fraction", "expected"), [
    (None, 1000.0, 0.5, None),             # never checked: at once
    (1000.0, 1000.0 + HOUR, 0.5, None),    # exactly due: at once
    (1000.0, 1000.0 + 3 * HOUR, 0.5, None),  # overdue: at once, never a whole interval later
    (1000.0, 1600.0, 0.0, HOUR - 600.0),   # the remainder...
    (1000.0, 1600.0, 0.5, HOUR - 600.0 + 0.5 * 30.0),  # ...plus the jitter (at most 30s)
    (1000.0, 900.0, 0.0, HOUR),            # the wall clock went back: just checked
])
def test_first_poll_delay(last: float | None, now: float, fraction: float,
                          expected: float | None) -> None:
    assert resume.first_poll_delay(last, HOUR, now, fraction) == expected


def test_the_jitter_is_a_small_fraction_of_short_intervals() -> None:
    assert resume.first_poll_delay(0.0, 10.0, 4.0, 0.99) == pytest.approx(6.0 + 0.99 * 0.5)


def _engine(store: store_mod.Store, clock: FakeClock, recorder: Recorder
            ) -> tuple[evaluator.Engine, SourceContext]:
    ctx = SourceContext.create(store=store)
    return evaluator.Engine(store, recorder, ctx=ctx, clock=clock, flush_interval=0), ctx


def test_a_restart_waits_for_the_rest_of_the_interval(tmp_path: Path) -> None:
    """An ``every`` monitor with ``interval: 1h`` restarted 10 minutes after its check
    does not fire at the restart; it fires 50 minutes (plus its jitter) later."""
    store = store_mod.Store(tmp_path / "state")
    m = monitor({"type": "poll", "command": ["true"], "interval": "1h"},
                condition={"mode": "every"}, name="hourly")
    clock = FakeClock()
    stamps: list[float] = []
    fired = Recorder(lambda _m, _e: stamps.append(clock.time()))

    async def go() -> float:
        engine, ctx = _engine(store, clock, fired)
        await engine.start(m)
        async with clock.driving():
            await until(lambda: len(stamps) == 1)
        await engine.close()
        await ctx.aclose()
        await clock.advance(600)
        at_restart = clock.time()
        engine, ctx = _engine(store, clock, fired)
        await engine.start(m)
        async with clock.driving(step=1.0, pause=0.0005):
            await asyncio.sleep(0.05)
            assert len(stamps) == 1, "the restart polled at once"
            await until(lambda: len(stamps) == 2, timeout=30)
        await engine.close()
        await ctx.aclose()
        return stamps[1] - at_restart

    waited = asyncio.run(go())
    jitter = offset_fraction("hourly") * 30.0
    # (virtual time runs on while the real `true` subprocess runs: a minute of slack)
    assert HOUR - 600 + jitter <= waited <= HOUR - 600 + jitter + 60.0


def test_an_overdue_monitor_polls_at_once_after_a_restart(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path / "state")
    m = monitor({"type": "poll", "command": ["true"], "interval": "1h"},
                condition={"mode": "every"}, name="hourly")
    clock = FakeClock()
    fired = Recorder()

    async def go() -> None:
        engine, ctx = _engine(store, clock, fired)
        await engine.start(m)
        async with clock.driving():
            await until(lambda: len(fired.events) == 1)
        await engine.close()
        await ctx.aclose()
        await clock.advance(2 * HOUR)
        engine, ctx = _engine(store, clock, fired)
        await engine.start(m)
        async with clock.driving():  # the start-up spread: at most 5ms of virtual time
            await until(lambda: len(fired.events) == 2)
        await engine.close()
        await ctx.aclose()

    asyncio.run(go())


def test_a_new_identity_polls_at_once(tmp_path: Path) -> None:
    """An edited monitor (new fingerprint) needs its baseline now, whatever its last
    check under the old identity."""
    store = store_mod.Store(tmp_path / "state")
    old = monitor({"type": "poll", "command": ["true"], "interval": "1h"},
                  condition={"mode": "every"}, name="hourly")
    new = monitor({"type": "poll", "command": ["echo", "x"], "interval": "1h"},
                  condition={"mode": "every"}, name="hourly")
    clock = FakeClock()
    fired = Recorder()

    async def go() -> None:
        engine, ctx = _engine(store, clock, fired)
        await engine.start(old)
        async with clock.driving():
            await until(lambda: len(fired.events) == 1)
            replaced_at = clock.monotonic()
            await engine.replace(new)
            await until(lambda: len(fired.events) == 2)
            assert clock.monotonic() - replaced_at < 60  # not the rest of the hour
        await engine.close()
        await ctx.aclose()

    asyncio.run(go())
