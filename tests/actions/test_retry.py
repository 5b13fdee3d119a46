"""The one retry policy of notify and webhook-out (actions.retry)."""

from __future__ import annotations

import asyncio

import pytest

from reconciler.actions import retry
from reconciler.state.store import Store
from tests.actions.conftest import (
    Receiver,
    event,
    fire,
    make_dispatcher,
    monitor,
    record,
    refused_port,
)


def test_retry_after_parsing() -> None:
    assert retry.retry_after("7") == 7.0
    assert retry.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 - 10) == 10.0
    assert retry.retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 + 10) == 0.0
    assert retry.retry_after("soon") is None and retry.retry_after(None) is None


def test_waits_double_with_jitter_up_to_the_cap() -> None:
    policy = retry.Policy(max_attempts=9, base=1.0, cap=5.0)
    assert [policy.delay(n, rand=lambda: 0.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.5]
    assert policy.delay(2, rand=lambda: 0.999999) == pytest.approx(2.0, rel=1e-5)
    assert 0.5 <= policy.delay(1) < 1.0


def test_retry_after_is_a_lower_bound_on_the_wait() -> None:
    policy = retry.Policy(max_attempts=3, base=1.0, cap=5.0)
    assert policy.delay(1, hint=7.0, rand=lambda: 0.0) == 7.0
    assert policy.delay(3, hint=0.1, rand=lambda: 0.0) == 2.0


def test_a_wait_past_max_time_gives_up_and_says_why() -> None:
    policy = retry.Policy(max_attempts=3, max_time=10.0)
    assert policy.gives_up(1.0, left=5.0) is None
    assert policy.gives_up(6.0, left=5.0) == "next wait 6.00s"
    assert policy.gives_up(9.0, left=5.0, hint=9.0) == "Retry-After 9s"
    assert retry.Policy(max_attempts=3).gives_up(1e9, left=None) is None


def test_retryable_statuses() -> None:
    assert all(retry.retryable_status(s) for s in (500, 503, 408, 429))
    assert not any(retry.retryable_status(s) for s in (200, 301, 400, 404))


def test_notify_and_webhook_out_wait_through_the_one_policy(
    store: Store, receiver: Receiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[tuple[int, int, float | None]] = []

    def delay(self: retry.Policy, nth: int, *, hint: float | None = None,
              rand: object = None) -> float:
        waits.append((self.max_attempts, nth, hint))
        return 0.0

    monkeypatch.setattr(retry.Policy, "delay", delay)
    receiver.script = [(503, {"Retry-After": "0"}), (200, {})]
    hook = monitor({"type": "webhook-out", "url": receiver.url, "maxAttempts": 4}, name="hook")
    toml = {"channels": {"down": {"url": f"json://127.0.0.1:{refused_port()}/", "maxAttempts": 2,
                                  "timeout": "5s"}}}
    note = monitor({"type": "notify", "channel": "down"}, name="note")
    evs = [event(hook), event(note)]
    for mon, ev in zip((hook, note), evs, strict=True):
        fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, toml)
        for mon, ev in zip((hook, note), evs, strict=True):
            await d.dispatch(mon, ev)
        assert await d.drain(30)
        await d.close()

    asyncio.run(go())
    assert record(store, hook, evs[0])["status"] == "succeeded"
    assert record(store, note, evs[1])["attempts"] == 2
    assert sorted(waits) == [(2, 1, None), (4, 1, 0.0)]
