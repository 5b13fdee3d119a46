"""webhook-out against a real loopback HTTP receiver."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from typing import Any

import httpx

from reconciler.actions import retry, webhook_send
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
from tests.helpers import endless_server, rss_bytes

SECRET = "hook-secret-value"


def _send(
    store: Store, receiver_url: str, *, environ: dict[str, str] | None = None, **action: Any
) -> tuple[Any, Any]:
    mon = monitor({"type": "webhook-out", "url": receiver_url, **action}, name="hooked")
    ev = event(mon, 'CI failed: "quotes" and ünïcode')
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ=environ or {})
        await d.dispatch(mon, ev)
        assert await d.drain(30)
        await d.close()

    asyncio.run(go())
    return mon, ev


def test_body_signature_and_idempotency_key(store: Store, receiver: Receiver) -> None:
    mon, ev = _send(
        store,
        receiver.url,
        environ={"HOOK_SECRET": SECRET},
        secretEnv="HOOK_SECRET",
        headers={"X-Team": "ci"},
    )
    [req] = receiver.requests
    assert req.headers["Idempotency-Key"] == ev.id
    assert req.headers["Content-Type"] == "application/json"
    assert req.headers["X-Team"] == "ci"
    expected = "sha256=" + hmac.new(SECRET.encode(), req.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(req.headers["X-Monitors-Signature-256"], expected)
    body = json.loads(req.body)
    assert body["id"] == ev.id and body["monitor"] == "hooked" and body["version"] == 1
    assert body["event"] == ev.summary and body["fingerprint"] == mon.fingerprint
    assert body["firedAt"] == ev.fired_at and body["signature"] == "sig-1"
    assert body["observation"] == ev.observation and body["meta"] == {"exitCode": 1}
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded" and rec["attempts"] == 1 and rec["httpStatus"] == 200
    assert rec["signed"] is True
    assert SECRET not in store.fire_dir(mon.name, ev.id).joinpath("event.json").read_text()


def test_unsigned_without_secret(store: Store, receiver: Receiver) -> None:
    mon, ev = _send(store, receiver.url, secretEnv="HOOK_SECRET")  # named but not set
    [req] = receiver.requests
    assert "X-Monitors-Signature-256" not in req.headers
    assert record(store, mon, ev)["signed"] is False


def test_500_500_200_retried_to_success_with_a_stable_key(store: Store, receiver: Receiver) -> None:
    receiver.script = [(500, {}), (503, {}), (200, {})]
    mon, ev = _send(store, receiver.url, environ={"S": SECRET}, secretEnv="S")
    reqs = receiver.requests
    assert len(reqs) == 3
    assert {r.headers["Idempotency-Key"] for r in reqs} == {ev.id}
    assert len({r.body for r in reqs}) == 1
    assert len({r.headers["X-Monitors-Signature-256"] for r in reqs}) == 1
    assert [r.headers["X-Monitors-Attempt"] for r in reqs] == ["1", "2", "3"]
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded" and rec["attempts"] == 3


def test_400_is_not_retried(store: Store, receiver: Receiver) -> None:
    receiver.script = [(400, {}), (200, {})]
    mon, ev = _send(store, receiver.url)
    assert len(receiver.requests) == 1
    rec = record(store, mon, ev)
    assert rec["status"] == "failed" and rec["httpStatus"] == 400
    assert "HTTP 400 (not retried)" in rec["reason"]


def test_408_and_429_are_retried(store: Store, receiver: Receiver) -> None:
    receiver.script = [(408, {}), (429, {}), (204, {})]
    mon, ev = _send(store, receiver.url)
    assert len(receiver.requests) == 3
    assert record(store, mon, ev)["status"] == "succeeded"


def test_retry_after_is_honoured(store: Store, receiver: Receiver) -> None:
    receiver.script = [(429, {"Retry-After": "1"}), (200, {})]
    mon, ev = _send(store, receiver.url)
    first, second = receiver.requests
    assert second.at - first.at >= 0.95  # backoff alone would be ~10 ms
    assert record(store, mon, ev)["status"] == "succeeded"


def test_retry_after_beyond_max_time_gives_up_at_once(store: Store, receiver: Receiver) -> None:
    receiver.script = [(503, {"Retry-After": "3600"}), (200, {})]
    mon, ev = _send(store, receiver.url, maxTime="5s")
    assert len(receiver.requests) == 1
    rec = record(store, mon, ev)
    assert rec["status"] == "failed"
    assert "Retry-After 3600s exceeds what is left of maxTime 5s" in rec["reason"]


def test_attempts_are_bounded_on_connect_errors(store: Store) -> None:
    mon, ev = _send(store, f"http://127.0.0.1:{refused_port()}/x", maxAttempts=3)
    rec = record(store, mon, ev)
    assert rec["status"] == "failed" and rec["attempts"] == 3 and rec["httpStatus"] is None
    assert "ConnectError" in rec["reason"] and "gave up after 3 attempt(s)" in rec["reason"]


def test_header_secrets_are_redacted_from_records(store: Store) -> None:
    token = "bearer-token-xyz"
    url = f"http://127.0.0.1:{refused_port()}/x?k=${{URL_KEY}}"
    mon, ev = _send(
        store,
        url,
        environ={"TOKEN": token, "URL_KEY": "url-key-secret"},
        headers={"Authorization": "Bearer ${TOKEN}"},
        maxAttempts=1,
    )
    text = store.fire_dir(mon.name, ev.id).joinpath("event.json").read_text()
    assert token not in text and "url-key-secret" not in text
    assert record(store, mon, ev)["status"] == "failed"


def test_an_endless_answer_ends_the_delivery_failed_in_bounded_time_and_memory() -> None:
    # The endpoint answers 200 and streams a body that never ends: each attempt ends at
    # its timeout (body included), maxTime ends the delivery, and at most a small cap of
    # the body is held (before: the whole body was read, 5.8 GB in 24 s, never ending).
    async def go() -> tuple[webhook_send.Delivery, float]:
        async with httpx.AsyncClient() as client:
            started = time.monotonic()
            delivery = await webhook_send.post(
                client, url + "/hook", b"{}", {}, timeout=1.0,
                policy=retry.Policy(max_attempts=5, max_time=4.0, base=0.1, cap=60.0))
            return delivery, time.monotonic() - started

    before = rss_bytes()
    with endless_server() as url:
        delivery, took = asyncio.run(go())
    assert not delivery.ok and "timed out" in delivery.reason, delivery
    assert took < 6.0
    assert rss_bytes() - before < 64 << 20
