"""Runtime findings on the action side: the attempt count survives a crash, the guard
tells the daemon about an auto-pause at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reconciler.actions import guards, recovery
from reconciler.state.store import Store
from tests.actions.conftest import Receiver, event, fire, make_dispatcher, monitor, record


def test_resend_after_a_crash_carries_the_attempt_count(tmp_path: Path,
                                                        receiver: Receiver) -> None:
    state = tmp_path / "state"
    mon = monitor({"type": "webhook-out", "url": receiver.url}, name="hook")
    ev = event(mon)
    receiver.script = [(503, {})]  # attempt 1 fails; the "crash" comes in the backoff

    async def first_life() -> None:
        store = Store(state)
        fire(store, mon, ev)
        d = make_dispatcher(store, backoff_base=30.0, backoff_cap=30.0)
        await d.dispatch(mon, ev)
        while not receiver.requests:
            await asyncio.sleep(0.01)
        await d.close()

    asyncio.run(asyncio.wait_for(first_life(), 20))
    # each attempt is recorded before its request: what a SIGKILL would leave behind
    assert record(Store(state), mon, ev)["attempts"] == 1

    async def second_life() -> list[recovery.Recovered]:
        store = Store(state)
        d = make_dispatcher(store)
        out = await recovery.recover(store, {"hook": mon}, d)
        assert await d.drain(20)
        await d.close()
        return out

    assert [r.outcome for r in asyncio.run(second_life())] == ["resent"]
    sent = receiver.wait_for(2)
    assert [r.headers["X-Monitors-Attempt"] for r in sent] == ["1", "2"]
    assert {r.headers["Idempotency-Key"] for r in sent} == {ev.id}
    rec = record(Store(state), mon, ev)
    assert rec["status"] == "succeeded" and rec["attempts"] == 2


def test_autopause_calls_the_hook_once(tmp_path: Path) -> None:
    mon = monitor({"type": "notify"}, name="firehose", rate_limit={"max": 2, "per": "1m"})
    seen: list[str] = []

    async def go() -> list[bool]:
        store = Store(tmp_path / "state")
        d = make_dispatcher(store)
        g = guards.build(store, d)
        g.on_autopause = seen.append
        allowed = [g.allow_fire(mon, event(mon)) for _ in range(5)]
        assert await d.drain(10)
        return allowed

    assert asyncio.run(go()) == [True, True, False, False, False]
    assert seen == ["firehose"]
