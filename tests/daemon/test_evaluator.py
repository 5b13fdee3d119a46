"""The engine: scheduling, persist-before-dispatch, crash roll-forward, refusals."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler import errors
from reconciler.daemon import evaluator, polls
from reconciler.daemon.clock import REAL, Clock
from reconciler.events import Event
from reconciler.model import Monitor, Observation
from reconciler.sources import poll as poll_source
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.factories import monitor
from tests.helpers import FakeClock, Recorder, until


class Scripted:
    """An in-memory poll source: each observe pops the next item (text or SourceError)
    for the monitor; when empty it repeats the last item. Records call times."""

    def __init__(self) -> None:
        self.script: dict[str, list[Any]] = {}
        self.last: dict[str, Any] = {}
        self.calls: dict[str, list[float]] = {}
        self.delay: dict[str, float] = {}
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}

    clock: Clock = REAL  # the engine's (``Env`` sets its fake clock)

    async def observe(self, m: Monitor, ctx: SourceContext) -> Observation:
        name = m.name
        self.calls.setdefault(name, []).append(self.clock.monotonic())
        self.active[name] = self.active.get(name, 0) + 1
        self.max_active[name] = max(self.max_active.get(name, 0), self.active[name])
        try:
            if self.delay.get(name):
                await self.clock.sleep(self.delay[name])
            queue = self.script.get(name) or []
            item = queue.pop(0) if queue else self.last.get(name, "idle")
            self.last[name] = item
            if isinstance(item, errors.SourceError):
                raise item
            return Observation(str(item))
        finally:
            self.active[name] -= 1


@pytest.fixture(params=[False, True], ids=["task", "eager"])
def scripted(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
             ) -> Iterator[Scripted]:
    """The scripted source, once as a type whose polls run in a task and once as one
    declaring ``EAGER`` (``daemon.eager``: started on the scheduler's callback, a task
    only when it waits, as with a ``delay``): every promise holds both ways."""
    s = Scripted()
    monkeypatch.setattr(poll_source, "observe", s.observe)
    monkeypatch.setattr(poll_source, "EAGER", request.param, raising=False)
    yield s


def pm(name: str = "m", interval: str = "1s", **kw: Any) -> Monitor:
    return monitor({"type": "poll", "command": "unused", "interval": interval}, name=name, **kw)


class Env:
    """An engine on a temp store and a fake clock driven in the background (intervals
    pass in virtual time: no test here sleeps through them)."""

    def __init__(self, tmp: Path, guard: Any = None, rec: Recorder | None = None) -> None:
        self.store = store_mod.Store(tmp / "state")
        self.rec = rec or Recorder()
        self.guard = guard
        self.clock = FakeClock()
        self.ctx: SourceContext | None = None
        self.engine: evaluator.Engine | None = None
        self._driving: contextlib.AbstractAsyncContextManager[None] | None = None

    async def __aenter__(self) -> evaluator.Engine:
        scripted = getattr(poll_source.observe, "__self__", None)  # the ``scripted`` fixture
        if isinstance(scripted, Scripted):
            scripted.clock = self.clock
        self.ctx = SourceContext.create(store=self.store)
        self.engine = evaluator.Engine(self.store, self.rec, ctx=self.ctx, guard=self.guard,
                                       flush_interval=0.1, clock=self.clock)
        self._driving = self.clock.driving()
        await self._driving.__aenter__()
        return self.engine

    async def __aexit__(self, *exc: object) -> None:
        assert self.engine is not None and self.ctx is not None and self._driving is not None
        try:
            await self.engine.close()
            await self.ctx.aclose()
        finally:
            await self._driving.__aexit__(None, None, None)


def checks(store: store_mod.Store, name: str = "m") -> int:
    live = store.liveness(name)
    return int(live["checkCount"]) if live else 0


def test_baseline_then_fire_is_durable_before_dispatch(tmp_path: Path, scripted: Scripted
                                                        ) -> None:
    scripted.script["m"] = ["a", "a", "b"]
    seen_on_disk: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def on_dispatch(m: Monitor, e: Event) -> None:
        base = tmp_path / "state" / "monitors" / m.name
        state = json.loads((base / "state.json").read_text())
        fire = json.loads((base / "fires" / e.id / "event.json").read_text())
        seen_on_disk.append((state, fire))

    env = Env(tmp_path, rec=Recorder(on_dispatch))

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            first = await engine.wait_first_poll(["m"], 5)
            assert first == {"m": polls.FirstPoll(True)}
            await until(lambda: len(env.rec.events) == 1)

    asyncio.run(go())
    event = env.rec.events[0]
    assert event.summary == "b" and event.reason == "changed"
    state, fire = seen_on_disk[0]
    assert state["lastSignature"] == "b" and state["lastEventId"] == event.id
    assert fire["status"] == "pending" and fire["event"]["id"] == event.id


def test_never_two_polls_at_once_and_skips_counted(tmp_path: Path, scripted: Scripted) -> None:
    scripted.delay["slow"] = 1.3
    env = Env(tmp_path)

    async def go() -> dict[str, int]:
        async with env as engine:
            await engine.start(pm("slow", interval="500ms"))
            await engine.start(pm("fast", interval="500ms"))
            await until(lambda: len(scripted.calls.get("fast", [])) >= 5, timeout=10)
            await until(lambda: len(scripted.calls.get("slow", [])) >= 2, timeout=10)
            return engine.skipped

    skipped = asyncio.run(go())
    assert scripted.max_active["slow"] == 1
    assert skipped["slow"] >= 1
    assert skipped["fast"] == 0  # a slow source delays only its own monitor


def test_check_errors_never_change_baseline(tmp_path: Path, scripted: Scripted) -> None:
    err = errors.SourceError("boom", kind="timeout")
    scripted.script["m"] = ["a", err, err, "a", err, "a"]
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            await until(lambda: len(scripted.calls.get("m", [])) >= 6, timeout=10)
            await until(lambda: checks(env.store) >= 6)

    asyncio.run(go())
    assert env.rec.events == []
    live = env.store.liveness("m")
    assert live is not None and live["consecutiveErrors"] == 0 and live["checkCount"] >= 6


def test_failed_fire_commit_leaves_stored_state_exactly(tmp_path: Path, scripted: Scripted
                                                        ) -> None:
    scripted.script["m"] = ["a"]  # repeated until the record cannot be made: then "b"
    env = Env(tmp_path)
    mdir = tmp_path / "state" / "monitors" / "m"

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            await engine.wait_first_poll(["m"], 5)
            before = (mdir / "state.json").read_bytes()
            (mdir / "fires").write_text("not a directory")  # the fire record cannot be made
            scripted.script["m"] = ["b"]
            await until(lambda: (env.store.liveness("m") or {}).get("consecutiveErrors", 0) >= 1)
            assert (mdir / "state.json").read_bytes() == before
            assert env.rec.events == []
            (mdir / "fires").unlink()
            await until(lambda: len(env.rec.events) == 1)  # retried on the next poll

    asyncio.run(go())
    assert env.rec.events[0].summary == "b"


def test_failed_state_write_rolls_back_fire_record(tmp_path: Path, scripted: Scripted,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    scripted.script["m"] = ["a"]  # repeated until the write is broken: then "b"
    env = Env(tmp_path)
    mdir = tmp_path / "state" / "monitors" / "m"

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            await engine.wait_first_poll(["m"], 5)
            before = (mdir / "state.json").read_bytes()

            def broken(name: str, record: Any) -> None:
                raise OSError(28, "No space left on device")

            monkeypatch.setattr(env.store, "write_state", broken)
            scripted.script["m"] = ["b"]
            await until(lambda: (env.store.liveness("m") or {}).get("consecutiveErrors", 0) >= 1)
            assert "No space left" in (env.store.liveness("m") or {})["lastError"]
            # Stopped, so no later poll's commit is half-way (its fire record written,
            # not yet rolled back) while the files are read.
            await engine.stop("m")
            assert (mdir / "state.json").read_bytes() == before
            assert env.store.fire_ids("m") == [] and env.rec.events == []

    asyncio.run(go())


def test_crash_between_fire_record_and_state_rolls_forward(tmp_path: Path, scripted: Scripted
                                                           ) -> None:
    m = pm()
    store = store_mod.Store(tmp_path / "state")
    store.write_state("m", {"fingerprint": m.fingerprint, "mode": "on-change",
                            "baseline": "a", "lastSignature": "a"})
    committed = {"fingerprint": m.fingerprint, "mode": "on-change", "baseline": "a",
                 "lastSignature": "b", "lastEventId": "20260101T000000.000000-aaaaaaaa"}
    ev = Event(id="20260101T000000.000000-aaaaaaaa", monitor=m.name, fingerprint=m.fingerprint,
               fired_at="2026-01-01T00:00:00.000000Z", summary="b", signature="b",
               observation="b", reason="changed")
    store.create_fire("m", ev, state=committed, at=0.0)  # crash: state.json never written
    scripted.script["m"] = ["b"]
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(m)
            await engine.wait_first_poll(["m"], 5)

    asyncio.run(go())
    assert env.rec.events == []  # the committed fire is not fired a second time
    assert store_mod.Store(tmp_path / "state").read_state("m")["lastSignature"] == "b"  # type: ignore[index]


def test_future_version_state_parks_monitor_and_keeps_file(tmp_path: Path, scripted: Scripted
                                                           ) -> None:
    mdir = tmp_path / "state" / "monitors" / "m"
    mdir.mkdir(parents=True)
    (mdir / "state.json").write_text('{"version": 7}')
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm())
            first = await engine.wait_first_poll(["m"], 2)
            assert first["m"] is not None and not first["m"].ok
            assert "version 7" in (first["m"].error or "")
            assert "m" in engine.parked and "m" in engine.running()

    asyncio.run(go())
    assert "m" not in scripted.calls
    assert (mdir / "state.json").read_text() == '{"version": 7}'


def test_corrupt_state_quarantined_then_fresh_baseline(tmp_path: Path, scripted: Scripted
                                                       ) -> None:
    mdir = tmp_path / "state" / "monitors" / "m"
    mdir.mkdir(parents=True)
    (mdir / "state.json").write_text("{torn")
    scripted.script["m"] = ["x"]
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm())
            assert (await engine.wait_first_poll(["m"], 5))["m"] == polls.FirstPoll(True)

    asyncio.run(go())
    assert env.rec.events == []
    assert [p.name.split("-")[0] for p in env.store.quarantined()] == ["state.json.corrupt"]
    assert env.store.read_state("m")["baseline"] == "x"  # type: ignore[index]


def test_replace_new_fingerprint_is_new_baseline_update_keeps_it(tmp_path: Path,
                                                                 scripted: Scripted) -> None:
    """A replace whose edit changes what is observed starts a new baseline (no fire on
    the changed observation); an interval edit keeps it (``conditions.baseline``), and
    an update in place keeps everything."""
    scripted.script["m"] = ["a"]
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm())
            await engine.wait_first_poll(["m"], 5)
            scripted.last["m"] = "b"
            edited = monitor({"type": "poll", "command": "other", "interval": "2s"}, name="m")
            await engine.replace(edited)
            await engine.wait_first_poll(["m"], 5)
            assert env.store.read_state("m")["fingerprint"] == edited.fingerprint  # type: ignore[index]
            assert env.rec.events == []
            scripted.last["m"] = "c"
            slower = monitor({"type": "poll", "command": "other", "interval": "3s"}, name="m")
            await engine.replace(slower)
            await engine.wait_first_poll(["m"], 5)
            await until(lambda: len(env.rec.events) == 1)  # c differs from the kept b
            relabeled = monitor({"type": "poll", "command": "other", "interval": "3s"},
                                name="m", labels={"team": "x"})
            await engine.update(relabeled)
            assert engine.running()["m"].labels == {"team": "x"}

    asyncio.run(go())
    assert [e.reason for e in env.rec.events] == ["changed"]


def test_autopaused_monitor_is_not_polled(tmp_path: Path, scripted: Scripted) -> None:
    env = Env(tmp_path)
    env.store.set_autopause("m", "rate limit", 0.0)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm("m", interval="500ms"))
            await engine.start(pm("other", interval="500ms"))
            await until(lambda: len(scripted.calls.get("other", [])) >= 3)

    asyncio.run(go())
    assert "m" not in scripted.calls


class Guard:
    def __init__(self) -> None:
        self.checks: list[bool] = []

    def allow_fire(self, monitor: Monitor, event: Event) -> bool:
        return False

    async def after_check(self, monitor: Monitor, *, ok: bool, error: str | None) -> None:
        self.checks.append(ok)


def test_guard_refusal_suppresses_fire_but_keeps_observation(tmp_path: Path, scripted: Scripted
                                                             ) -> None:
    scripted.script["m"] = ["a", "b", errors.SourceError("x")]
    guard = Guard()
    env = Env(tmp_path, guard=guard)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            await until(lambda: len(guard.checks) >= 3)

    asyncio.run(go())
    assert env.rec.events == [] and env.store.fire_ids("m") == []
    assert env.store.read_state("m")["lastSignature"] == "b"  # type: ignore[index]
    assert guard.checks[:3] == [True, True, False]


def test_webhook_monitor_waits_for_pushes(tmp_path: Path) -> None:
    """Started, not polled, not parked; ``push`` evaluates what is pushed, in order."""
    env = Env(tmp_path)
    m = monitor({"type": "webhook", "provider": "github", "events": ["push"]}, name="hook")

    async def go() -> None:
        async with env as engine:
            await engine.start(m)
            first = (await engine.wait_first_poll(["hook"], 1))["hook"]
            assert first is not None and first.ok and engine.parked == {}
            one = await engine.push("hook", Observation("a"))
            two = await engine.push("hook", Observation("b"))
            assert one is not None and one.event is None  # on-change: the baseline
            assert two is not None and two.event is not None
            assert await engine.push("nope", Observation("c")) is None
            polled = await engine.poll_once(m)
            assert polled.error and "push source" in polled.error

    asyncio.run(go())
    assert len(env.store.fire_ids("hook")) == 1


def test_permanent_error_parks(tmp_path: Path) -> None:
    env = Env(tmp_path)
    m = monitor({"type": "device", "device": "nowhere", "interval": "1s"}, name="d")

    async def go() -> None:
        async with env as engine:
            await engine.start(m)
            first = (await engine.wait_first_poll(["d"], 5))["d"]
            assert first is not None and not first.ok
            assert "not in the fleet" in engine.parked["d"]

    asyncio.run(go())


def test_poll_once_fires_and_dispatches(tmp_path: Path, scripted: Scripted) -> None:
    scripted.script["m"] = ["fail 1"]
    env = Env(tmp_path)
    m = pm(condition={"mode": "match", "match": "fail"})

    async def go() -> polls.PollResult:
        async with env as engine:
            return await engine.poll_once(m)

    result = asyncio.run(go())
    assert result.ok and result.event is not None and result.event.summary == "fail"
    assert env.rec.events == [result.event]
    assert env.store.liveness("m")["checkCount"] == 1  # type: ignore[index]


def test_first_polls_spread_when_many_start(tmp_path: Path, scripted: Scripted) -> None:
    env = Env(tmp_path)
    n = 400

    async def go() -> None:
        async with env as engine:
            for i in range(n):
                await engine.start(pm(f"m{i}", interval="2s"))
            names = [f"m{i}" for i in range(n)]
            done = await engine.wait_first_poll(names, 10)
            assert all(v is not None and v.ok for v in done.values())

    asyncio.run(go())
    firsts = sorted(calls[0] for calls in scripted.calls.values())
    span = firsts[-1] - firsts[0]
    assert span > 0.8  # 400 starts at 200/s: spread over ~2 s, not one burst
    first_100ms = sum(1 for t in firsts if t - firsts[0] < 0.1)
    assert first_100ms < n / 4
    assert polls.offset_fraction("m1") == polls.offset_fraction("m1")


def test_command_stream_evaluated_and_killed_on_stop(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    m = monitor({"type": "command",
                 "command": f"echo $$ > {pidfile}; echo start; sleep 0.3; echo changed; "
                            "sleep 300"}, name="c")
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(m)
            assert (await engine.wait_first_poll(["c"], 5))["c"] == polls.FirstPoll(True)
            await until(lambda: len(env.rec.events) == 1)
            await engine.stop("c")

    asyncio.run(go())
    assert env.rec.events[0].summary == "changed"
    from reconciler.sources import pid

    deadline = time.monotonic() + 5
    while pid.alive(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid.alive(int(pidfile.read_text()))


def test_command_endless_line_is_a_check_error_in_liveness(tmp_path: Path) -> None:
    m = monitor({"type": "command", "command": ["cat", "/dev/zero"], "maxBytes": 4096},
                name="z")
    env = Env(tmp_path)

    async def go() -> dict[str, Any]:
        async with env as engine:
            await engine.start(m)
            await until(lambda: bool((env.store.liveness("z") or {}).get("lastError")))
            live = env.store.liveness("z") or {}
            await engine.stop("z")
            return live

    live = asyncio.run(go())
    assert live["lastError"] == ("line-too-long: a line longer than maxBytes (4096 bytes); "
                                 "command killed, restarting")
    assert not env.rec.events


def test_http_polls_in_flight_are_capped(tmp_path: Path) -> None:
    import http.server
    import threading

    from tests.helpers import http_server, reply

    lock = threading.Lock()
    state = {"now": 0, "max": 0, "total": 0}

    def slow(h: http.server.BaseHTTPRequestHandler) -> None:
        with lock:
            state["now"] += 1
            state["total"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.2)
        with lock:
            state["now"] -= 1
        reply(h, 200, b"ok")

    store = store_mod.Store(tmp_path / "state")
    rec = Recorder()

    async def go() -> None:
        ctx = SourceContext.create(store=store, http_in_flight=2)
        engine = evaluator.Engine(store, rec, ctx=ctx, flush_interval=0)
        try:
            for i in range(6):
                await engine.start(monitor({"type": "poll-http", "url": base + "/slow",
                                            "interval": "1s"}, name=f"h{i}"))
            done = await engine.wait_first_poll([f"h{i}" for i in range(6)], 10)
            assert all(v is not None and v.ok for v in done.values())
        finally:
            await engine.close()
            await ctx.aclose()

    with http_server({"/slow": slow}) as base:
        asyncio.run(go())
    assert state["total"] >= 6 and state["max"] == 2


def test_polls_follow_the_engines_clock_not_real_time(tmp_path: Path, scripted: Scripted
                                                      ) -> None:
    """A 30 s interval polls once per 30 s of the engine's clock (a fake one here, moved
    by hand): the first poll right after start, the next exactly one interval later."""
    store = store_mod.Store(tmp_path / "state")
    clock = FakeClock()
    scripted.clock = clock

    async def go() -> list[float]:
        ctx = SourceContext.create(store=store)
        engine = evaluator.Engine(store, Recorder(), ctx=ctx, flush_interval=0, clock=clock)
        start = clock.monotonic()
        try:
            await engine.start(pm(interval="30s"))
            await clock.advance(0.01)  # the first poll's start-up offset (< 5 ms here)
            await engine.wait_first_poll(["m"], 5)  # done: its writes are not in flight
            await clock.advance(29.0)
            assert len(scripted.calls["m"]) == 1
            await clock.advance(1.0)
            await until(lambda: (store.liveness("m") or {}).get("checkCount") == 2)
            return [t - start for t in scripted.calls["m"]]
        finally:
            await engine.close()
            await ctx.aclose()

    first, second = asyncio.run(asyncio.wait_for(go(), 10))
    assert 0 <= first < 0.01
    assert second - first == pytest.approx(30.0)
    live = store.liveness("m") or {}
    assert live.get("checkCount") == 2
    assert live.get("lastCheckedAt") == pytest.approx(1_750_000_000.0 + second)  # clock.time()


def test_eager_source_polls_make_a_task_only_when_they_wait(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """A source type declaring ``EAGER`` (``daemon.eager``): a poll that never waits runs
    on the scheduler's callback, no task; one that waits goes on in a task."""
    source = Scripted()
    monkeypatch.setattr(poll_source, "observe", source.observe)
    monkeypatch.setattr(poll_source, "EAGER", True, raising=False)
    source.delay["slow"] = 0.2
    tasks: list[str] = []
    env = Env(tmp_path)

    async def go() -> None:
        loop = asyncio.get_running_loop()
        create_task = loop.create_task

        def counting(coro: Any, **kw: Any) -> Any:
            tasks.append(getattr(coro, "__qualname__", ""))
            return create_task(coro, **kw)

        monkeypatch.setattr(loop, "create_task", counting)
        async with env as engine:
            await engine.start(pm("quick", interval="500ms"))
            await engine.start(pm("slow", interval="500ms"))
            await until(lambda: checks(env.store, "quick") >= 4
                        and checks(env.store, "slow") >= 3, timeout=10)

    asyncio.run(go())
    assert "Engine._poll_task" not in tasks  # every poll started eagerly
    # Only the slow source's polls waited (one task each, carrying on where it waited),
    # and the quick one's first check (it waits for its own liveness.json).
    assert 3 <= tasks.count("_rest") <= len(source.calls["slow"]) + 1


def test_an_unchanged_check_reuses_the_last_decision(tmp_path: Path, scripted: Scripted,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``conditions.decide`` is pure: the same text against the same stored state and
    monitor is not decided again; a new text or a new state is."""
    from reconciler import conditions

    scripted.script["m"] = ["a"] * 5 + ["b"] * 5 + ["a"]
    decide = conditions.decide
    decided: list[str] = []

    def counting(m: Monitor, observation: Observation, previous: Any) -> Any:
        decided.append(observation.text)
        return decide(m, observation, previous)

    monkeypatch.setattr(conditions, "decide", counting)
    env = Env(tmp_path)

    async def go() -> None:
        async with env as engine:
            await engine.start(pm(interval="500ms"))
            await until(lambda: checks(env.store) >= 11, timeout=10)

    asyncio.run(go())
    assert [e.summary for e in env.rec.events] == ["b", "a"]
    # a: baseline (stored), unchanged (remembered), 3 reused; b: fired (stored),
    # unchanged against the new state (remembered), 3 reused; a: fired.
    assert decided[:5] == ["a", "a", "b", "b", "a"]


def test_a_pid_monitor_polls_eagerly_and_fires_when_the_process_exits(tmp_path: Path) -> None:
    """``pid`` declares ``EAGER``: its first poll waits (it writes the marker in a worker
    thread) and goes on in a task; later polls run on the scheduler's callback; the
    exit still fires."""
    import subprocess

    from reconciler.sources import registry

    child = subprocess.Popen(["sleep", "30"])
    env = Env(tmp_path)
    m = monitor({"type": "pid", "pid": child.pid, "interval": "500ms"}, name="p")
    assert registry.is_eager(m)

    async def go() -> None:
        async with env as engine:
            await engine.start(m)
            assert (await engine.wait_first_poll(["p"], 5))["p"] == polls.FirstPoll(True)
            await until(lambda: checks(env.store, "p") >= 3)
            assert env.rec.events == []
            child.kill()
            child.wait()
            await until(lambda: len(env.rec.events) == 1)

    try:
        asyncio.run(go())
    finally:
        child.kill()
        child.wait()
    assert env.rec.events[0].summary == "exited"
