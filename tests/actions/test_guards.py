"""Rate limit and drought: each owner notification exactly once, persisted across restarts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from reconciler.actions import guards
from reconciler.state.store import Store
from tests.actions.conftest import event, fire, make_dispatcher, monitor, notifications


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limit_autopauses_and_notifies_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mon = monitor({"type": "notify"}, name="firehose", rate_limit={"max": 3, "per": "1m"})
    clock = Clock()

    async def first_life() -> list[bool]:
        store = Store(state)
        d = make_dispatcher(store)
        g = guards.build(store, d, clock=clock)
        allowed = []
        for _ in range(10):
            allowed.append(g.allow_fire(mon, event(mon)))
            clock.now += 1
        assert await d.drain(10)
        return allowed

    allowed = asyncio.run(first_life())
    assert allowed == [True] * 3 + [False] * 7
    owner = [line for line in notifications(Store(state)) if "rate limit" in line]
    assert len(owner) == 1
    assert "NOTIFY firehose: rate limit: more than 3 fires within 1m; auto-paused" in owner[0]
    pause = Store(state).autopause("firehose")
    assert pause is not None and "more than 3 fires" in pause["reason"] and pause["at"]

    async def second_life() -> tuple[bool, bool, bool]:
        store = Store(state)  # a daemon restart: new store, new guards
        d = make_dispatcher(store)
        g = guards.build(store, d, clock=clock)
        clock.now += 3600  # long after the window: still paused
        still = g.allow_fire(mon, event(mon))
        cleared = g.clear("firehose")
        after = g.allow_fire(mon, event(mon))
        assert await d.drain(10)
        return still, cleared, after

    still, cleared, after = asyncio.run(second_life())
    assert (still, cleared, after) == (False, True, True)
    assert Store(state).autopause("firehose") is None
    assert len([line for line in notifications(Store(state)) if "rate limit" in line]) == 1


def test_window_slides(store: Store) -> None:
    mon = monitor({"type": "notify"}, rate_limit={"max": 2, "per": "10s"})
    clock = Clock()

    async def go() -> list[bool]:
        g = guards.build(store, make_dispatcher(store), clock=clock)
        out = []
        for step in (0, 4, 11, 15, 16):  # never more than 2 within any 10 s
            clock.now = 1000.0 + step
            out.append(g.allow_fire(mon, event(mon)))
        return out

    assert asyncio.run(go()) == [True, True, True, True, False]


def test_drought_of_checks_notifies_once_then_recovers_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    mon = monitor({"type": "notify"}, name="dry")

    def owner_lines() -> list[str]:
        return [line for line in notifications(Store(state)) if "NOTIFY dry:" in line]

    async def life(checks: list[bool]) -> None:
        store = Store(state)
        d = make_dispatcher(store)
        g = guards.build(store, d)
        for ok in checks:
            await g.after_check(mon, ok=ok, error=None if ok else "timeout: no answer")
        assert await d.drain(10)

    asyncio.run(life([False] * 4))
    assert owner_lines() == []
    asyncio.run(life([False] * 1))  # a restart forgets the count: 1 of 5 again
    assert owner_lines() == []
    asyncio.run(life([False] * 12))
    [alarm] = owner_lines()
    assert "drought: 5 consecutive failed checks; the monitor is doing nothing" in alarm
    assert "last error: timeout: no answer" in alarm
    asyncio.run(life([False] * 3))  # after a restart the alarm is not repeated
    assert len(owner_lines()) == 1
    asyncio.run(life([True, True, True]))  # and the recovery notice is not lost
    lines = owner_lines()
    assert len(lines) == 2 and "recovered: checks succeed again" in lines[1]
    asyncio.run(life([False] * 5))  # may escalate again later
    assert len(owner_lines()) == 3


def _drought_life(state: Path, checks: list[bool]) -> Store:
    mon = monitor({"type": "notify"}, name="dry")

    async def life() -> Store:
        store = Store(state)
        d = make_dispatcher(store)
        g = guards.build(store, d)
        for ok in checks:
            await g.after_check(mon, ok=ok, error=None if ok else "boom")
        assert await d.drain(10)
        return store

    return asyncio.run(life())


def test_drought_record_is_versioned_and_readable_by_the_old_format(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = _drought_life(state, [False] * 5)
    data = json.loads((store.monitor_dir("dry") / "drought.json").read_text())
    assert data["version"] == 1 and data["checks"]["count"] == 5 and "since" in data["checks"]
    assert set(data) == {"version", "checks"}  # the file the guards wrote before
    assert Store(state).drought("dry") == {"checks": data["checks"]}


def test_corrupt_drought_record_is_moved_aside_and_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = Store(state).monitor_dir("dry") / "drought.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    store = _drought_life(state, [False] * 5)
    assert [p.name.split(".corrupt-")[0] for p in store.quarantined()] == ["drought.json"]
    assert any("drought.json: corrupt record" in p for p in store.problems)
    assert json.loads(path.read_text())["checks"]["count"] == 5  # started fresh


def test_future_drought_record_is_kept_not_overwritten(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = Store(state).monitor_dir("dry") / "drought.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 99, "checks": {"since": "x", "count": 1}}')
    store = _drought_life(state, [False] * 5)
    assert json.loads(path.read_text())["version"] == 99
    assert any("format version 99" in p for p in store.problems)


def test_drought_of_fires_through_the_dispatcher(store: Store) -> None:
    bad = monitor({"type": "routine", "routine": "missing"}, name="broken")

    async def go() -> None:
        d = make_dispatcher(store)
        guards.build(store, d)
        for _ in range(7):
            ev = event(bad)
            fire(store, bad, ev)
            await d.dispatch(bad, ev)
        assert await d.drain(10)

    asyncio.run(go())
    owner = [line for line in notifications(store) if "drought" in line]
    assert len(owner) == 1
    assert "5 consecutive failed fires" in owner[0] and "unknown routine 'missing'" in owner[0]
    assert (store.monitor_dir("broken") / "drought.json").exists()


def test_owner_channels_from_config(store: Store) -> None:
    assert make_dispatcher(store).config.owner_channels == ("log",)
    d = make_dispatcher(store, {"channels": {"pager": {"url": "json://127.0.0.1:1/"}},
                                "owner": {"channels": ["pager", "log"]}})
    assert d.config.owner_channels == ("pager", "log")


def test_restart_does_not_reset_the_window(store: Store) -> None:
    mon = monitor({"type": "notify"}, name="loopy", rate_limit={"max": 2, "per": "1h"})
    for _ in range(2):  # two fires recorded by the previous daemon, minutes ago
        fire(store, mon, event(mon))

    async def go() -> list[bool]:
        g = guards.build(store, make_dispatcher(store))
        return [g.allow_fire(mon, event(mon)) for _ in range(2)]

    assert asyncio.run(go()) == [False, False]
    assert store.autopause("loopy") is not None

    async def resume() -> list[bool]:
        g = guards.build(store, make_dispatcher(store))
        assert g.clear("loopy")
        return [g.allow_fire(mon, event(mon)) for _ in range(3)]

    assert asyncio.run(resume()) == [True, True, False]  # resume starts a fresh window


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
