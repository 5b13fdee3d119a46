"""sources.workers: the cap on jobs in flight that HTTP polls run in."""

from __future__ import annotations

import asyncio
import http.server
import threading
import time

import pytest

from reconciler.sources import http
from reconciler.sources.context import SourceContext
from reconciler.sources.workers import Workers
from tests.factories import monitor
from tests.helpers import http_server, reply, until


def test_at_most_size_jobs_run_at_once_in_submission_order() -> None:
    started: list[int] = []
    running = {"now": 0, "max": 0}

    async def job(i: int) -> int:
        started.append(i)
        running["now"] += 1
        running["max"] = max(running["max"], running["now"])
        await asyncio.sleep(0.01)
        running["now"] -= 1
        return i * 10

    async def go() -> list[int]:
        workers = Workers(3)
        try:
            return list(await asyncio.gather(*(workers.run(job, i) for i in range(10))))
        finally:
            await workers.aclose()

    assert asyncio.run(go()) == [i * 10 for i in range(10)]
    assert running["max"] == 3
    assert started == list(range(10))


def test_a_jobs_exception_is_raised_in_its_caller_and_the_worker_goes_on() -> None:
    async def boom() -> None:
        raise ValueError("bad input")

    async def fine() -> str:
        return "ok"

    async def go() -> str:
        workers = Workers(1)
        try:
            with pytest.raises(ValueError, match="bad input"):
                await workers.run(boom)
            return await workers.run(fine)
        finally:
            await workers.aclose()

    assert asyncio.run(go()) == "ok"


def test_the_next_job_starts_in_the_step_the_previous_one_ended() -> None:
    # What httpcore's pool needs (see the module docstring): a queued job starts before
    # anything else runs on the loop, as a loop of requests would send its next one;
    # a semaphore would start it one loop step later.
    seen: list[str] = []

    async def first() -> None:
        await asyncio.sleep(0)
        asyncio.get_running_loop().call_soon(seen.append, "next step")

    async def second() -> None:
        seen.append("second started")

    async def go() -> None:
        workers = Workers(1)
        try:
            await asyncio.gather(workers.run(first), workers.run(second))
        finally:
            await workers.aclose()

    asyncio.run(go())
    assert seen[0] == "second started"


async def after() -> str:
    return "after"


def test_a_cancelled_caller_drops_its_queued_job_and_cancels_its_running_one() -> None:
    events: list[str] = []

    async def slow(name: str, gate: asyncio.Event) -> None:
        events.append(f"{name} started")
        try:
            await gate.wait()
        except asyncio.CancelledError:
            events.append(f"{name} cancelled")
            raise

    async def go() -> str:
        workers = Workers(1)
        gate = asyncio.Event()
        try:
            running = asyncio.ensure_future(workers.run(slow, "running", gate))
            queued = asyncio.ensure_future(workers.run(slow, "queued", gate))
            await until(lambda: events == ["running started"])
            queued.cancel()
            running.cancel()
            await asyncio.gather(running, queued, return_exceptions=True)
            # the worker survived both and runs the next job at once
            return await asyncio.wait_for(workers.run(after), 2)
        finally:
            await workers.aclose()

    assert asyncio.run(go()) == "after"
    assert events == ["running started", "running cancelled"]


def test_aclose_cancels_running_and_queued_jobs() -> None:
    async def forever() -> None:
        await asyncio.Event().wait()

    async def go() -> list[object]:
        workers = Workers(1)
        calls = [asyncio.ensure_future(workers.run(forever)) for _ in range(2)]
        await asyncio.sleep(0.05)
        await workers.aclose()
        return list(await asyncio.gather(*calls, return_exceptions=True))

    results = asyncio.run(asyncio.wait_for(go(), 5))
    assert all(isinstance(r, asyncio.CancelledError) for r in results)


def test_stopping_a_hanging_http_poll_frees_its_slot_at_once() -> None:
    # One request in flight at most: a poll whose server never answers is cancelled
    # (its monitor stopped); the next poll must not wait for the first one's timeout.
    arrived = threading.Event()
    done = threading.Event()

    def hang(h: http.server.BaseHTTPRequestHandler) -> None:
        arrived.set()
        done.wait(30)

    def ok(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200, b"fine")

    async def go(base: str) -> float:
        ctx = SourceContext.create(http_in_flight=1)
        hanging = monitor({"type": "poll-http", "url": base + "/hang", "interval": "30s",
                           "timeout": "30s"}, name="hanging")
        fine = monitor({"type": "poll-http", "url": base + "/ok", "interval": "30s",
                        "timeout": "20s"}, name="fine")
        try:
            poll = asyncio.ensure_future(http.observe(hanging, ctx))
            await until(arrived.is_set)
            poll.cancel()
            started = time.monotonic()
            observed = await http.observe(fine, ctx)
            assert observed.text == "200\nfine"
            return time.monotonic() - started
        finally:
            await ctx.aclose()

    with http_server({"/hang": hang, "/ok": ok}) as base:
        try:
            took = asyncio.run(asyncio.wait_for(go(base), 25))
        finally:
            done.set()
    assert took < 5
