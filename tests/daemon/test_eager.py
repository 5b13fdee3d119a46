"""``daemon.eager.start``: a coroutine runs at once; a task only when it waits."""

from __future__ import annotations

import asyncio

import pytest

from reconciler.daemon import eager


def test_a_coroutine_that_never_waits_finishes_at_once_without_a_task() -> None:
    done: list[str] = []

    async def quick() -> None:
        done.append("ran")

    async def go() -> tuple[asyncio.Task[None] | None, int, int]:
        before = len(asyncio.all_tasks())
        task = eager.start(quick(), loop=asyncio.get_running_loop())
        return task, before, len(asyncio.all_tasks())

    task, before, after = asyncio.run(go())
    assert task is None and done == ["ran"] and after == before


def test_a_coroutine_that_waits_goes_on_in_a_task_with_its_result() -> None:
    steps: list[object] = []

    async def waits(fut: asyncio.Future[int]) -> int:
        steps.append("before")
        value = await fut
        steps.append(asyncio.current_task())
        await asyncio.sleep(0)  # a bare yield, too
        return value + 1

    async def go() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        task = eager.start(waits(fut), loop=loop, name="waiter")
        assert task is not None and task.get_name() == "waiter"
        assert steps == ["before"] and not task.done()
        fut.set_result(41)
        assert await task == 42
        assert steps == ["before", task]  # the rest ran as that task

    asyncio.run(go())


def test_cancelling_the_task_cancels_what_the_coroutine_waits_on() -> None:
    seen: list[str] = []

    async def waits(fut: asyncio.Future[None]) -> None:
        try:
            await fut
        except asyncio.CancelledError:
            seen.append("cancelled inside")
            raise
        finally:
            seen.append("finally")

    async def go() -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        task = eager.start(waits(fut), loop=loop)
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fut.cancelled()

    asyncio.run(go())
    assert seen == ["cancelled inside", "finally"]


def test_errors_before_the_first_wait_reach_the_caller_later_ones_the_task() -> None:
    async def fails_at_once() -> None:
        raise ValueError("at once")

    async def fails_later(fut: asyncio.Future[None]) -> None:
        await fut
        raise KeyError("later")

    async def go() -> None:
        loop = asyncio.get_running_loop()
        with pytest.raises(ValueError, match="at once"):
            eager.start(fails_at_once(), loop=loop)
        fut: asyncio.Future[None] = loop.create_future()
        task = eager.start(fails_later(fut), loop=loop)
        assert task is not None
        fut.set_result(None)
        with pytest.raises(KeyError):
            await task

    asyncio.run(go())


def test_a_bare_yield_as_the_first_wait_goes_on_at_the_next_loop_turn() -> None:
    async def yields() -> str:
        await asyncio.sleep(0)
        return "done"

    async def go() -> str:
        task = eager.start(yields(), loop=asyncio.get_running_loop())
        assert task is not None
        return await task

    assert asyncio.run(go()) == "done"
