"""notify: the built-in log channel, Apprise for real on loopback, failing channels."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from reconciler.state.store import Store
from tests.actions.conftest import (
    Receiver,
    event,
    fire,
    make_dispatcher,
    monitor,
    notifications,
    record,
    refused_port,
)
from tests.helpers import endless_server, rss_bytes


def test_log_channel_is_the_default(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    mon = monitor({"type": "notify", "message": "{{ monitor.name }} saw {event}"}, name="disk")
    ev = event(mon, "95% full\nsecond line")
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store)
        await d.dispatch(mon, ev)
        assert await d.drain(10)

    with caplog.at_level(logging.INFO, logger="monitors.notify"):
        asyncio.run(go())
    lines = [r.getMessage() for r in caplog.records if r.name == "monitors.notify"]
    assert lines == ["NOTIFY disk: disk saw 95% full\\nsecond line"]
    [line] = notifications(store)
    assert line.endswith(f"NOTIFY disk: disk saw 95% full\\nsecond line [{ev.id}]")
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded" and rec["channels"] == ["log"] and rec["attempts"] == 1


def test_apprise_delivers_to_a_loopback_endpoint(store: Store, receiver: Receiver) -> None:
    port = receiver.url.split(":")[2].split("/")[0]
    toml = {"channels": {"hook": {"url": f"json://127.0.0.1:{port}/notify", "timeout": "10s"}}}
    mon = monitor({"type": "notify", "channel": "hook", "message": "deploy: {event}"})
    ev = event(mon, "v1.2 is live")
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, toml)
        await d.dispatch(mon, ev)
        assert await d.drain(20)

    asyncio.run(go())
    [req] = receiver.requests
    assert req.path == "/notify"
    payload = json.loads(req.body)
    assert payload["message"] == "deploy: v1.2 is live"
    assert payload["title"] == "monitors: mon"
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded" and rec["channels"] == ["hook"]
    assert notifications(store) == []  # not the log channel


def test_failing_channel_fails_only_its_dispatch(store: Store) -> None:
    toml = {
        "channels": {
            "broken": {
                "url": f"json://127.0.0.1:{refused_port()}/",
                "maxAttempts": 2,
                "timeout": "5s",
            },
            "bogus": {"url": "nosuchscheme://x"},
        }
    }
    broken = monitor({"type": "notify", "channel": "broken"}, name="broken")
    bogus = monitor({"type": "notify", "channel": "bogus"}, name="bogus")
    unknown = monitor({"type": "notify", "channel": "pager"}, name="unknown")
    healthy = monitor({"type": "notify"}, name="healthy")
    fired: list[tuple[object, object]] = []

    async def go() -> None:
        d = make_dispatcher(store, toml)
        for _ in range(3):
            for mon in (broken, bogus, unknown, healthy):
                ev = event(mon, "tick")
                fire(store, mon, ev)
                await d.dispatch(mon, ev)
                fired.append((mon, ev))
        assert await d.drain(30)

    asyncio.run(go())
    by_name: dict[str, list[dict[str, object]]] = {}
    for mon, ev in fired:
        by_name.setdefault(mon.name, []).append(record(store, mon, ev))  # type: ignore[attr-defined]
    assert [r["status"] for r in by_name["healthy"]] == ["succeeded"] * 3
    for r in by_name["broken"]:
        assert r["status"] == "failed" and r["attempts"] == 2
        assert str(r["reason"]).startswith("broken: failed after 2 attempt(s)")
    for r in by_name["bogus"]:
        assert r["status"] == "failed" and "not a valid Apprise URL" in str(r["reason"])
    for r in by_name["unknown"]:
        assert r["status"] == "failed" and "pager: unknown channel" in str(r["reason"])
    assert len(notifications(store)) == 3


def test_channel_url_secret_is_expanded_and_never_recorded(
    store: Store, receiver: Receiver
) -> None:
    port = receiver.url.split(":")[2].split("/")[0]
    toml = {"channels": {"hook": {"url": f"json://127.0.0.1:{port}/${{HOOK_PATH}}"}}}
    mon = monitor({"type": "notify", "channel": "hook"})
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, toml, environ={"HOOK_PATH": "secret-path-123"})
        await d.dispatch(mon, ev)
        assert await d.drain(20)

    asyncio.run(go())
    assert receiver.requests[0].path == "/secret-path-123"
    text = store.fire_dir(mon.name, ev.id).joinpath("event.json").read_text()
    assert "secret-path-123" not in text and record(store, mon, ev)["status"] == "succeeded"


def test_channel_rate_limit_spaces_deliveries(store: Store, receiver: Receiver) -> None:
    port = receiver.url.split(":")[2].split("/")[0]
    toml = {
        "channels": {
            "hook": {"url": f"json://127.0.0.1:{port}/", "rateLimit": {"max": 2, "per": "1s"}}
        }
    }
    mon = monitor({"type": "notify", "channel": "hook"})

    async def go() -> None:
        d = make_dispatcher(store, toml)
        for i in range(3):
            ev = event(mon, f"n{i}")
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
        assert await d.drain(20)

    started = time.monotonic()
    asyncio.run(go())
    times = sorted(r.at for r in receiver.requests)
    assert len(times) == 3
    # the third waited for the window (measured from the start: each send starts an
    # Apprise child process, whose start-up time varies between sends)
    assert times[2] - started >= 0.95


def test_an_endless_answer_fails_the_fire_in_bounded_time_and_memory(store: Store) -> None:
    # Apprise reads a channel's whole answer; before, a thread kept reading an endless
    # one after the timeout, growing the daemon without bound. Now the send runs in a
    # child process killed at the timeout.
    mon = monitor({"type": "notify", "channel": "big"})
    ev = event(mon)
    fire(store, mon, ev)
    before = rss_bytes()
    started = time.monotonic()
    with endless_server(rate=64 << 20) as url:
        toml = {"channels": {"big": {"url": url.replace("http://", "json://") + "/",
                                     "timeout": "1s", "maxAttempts": 2}}}

        async def go() -> None:
            d = make_dispatcher(store, toml)
            await d.dispatch(mon, ev)
            assert await d.drain(20)
            await asyncio.sleep(1.0)  # what a thread left reading would take meanwhile

        asyncio.run(go())
        grown = rss_bytes() - before
    rec = record(store, mon, ev)
    assert rec["status"] == "failed" and "no answer within 1s" in str(rec["reason"]), rec
    assert time.monotonic() - started < 8
    assert grown < 64 << 20


def test_the_default_message_appends_the_diff(store: Store,
                                              caplog: pytest.LogCaptureFixture) -> None:
    import dataclasses

    mon = monitor({"type": "notify"}, name="page")
    ev = dataclasses.replace(event(mon, "v2"), previous="v1", diff="--- previous\n"
                             "+++ current\n@@ -1 +1 @@\n-v1\n+v2")
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store)
        await d.dispatch(mon, ev)
        assert await d.drain(10)

    with caplog.at_level(logging.INFO, logger="monitors.notify"):
        asyncio.run(go())
    [line] = [r.getMessage() for r in caplog.records if r.name == "monitors.notify"]
    assert line == "NOTIFY page: page: v2\\n--- previous\\n+++ current\\n@@ -1 +1 @@\\n-v1\\n+v2"
