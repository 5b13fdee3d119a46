"""actions.bounded: one HTTP exchange bounded as a whole."""

from __future__ import annotations

import asyncio

import httpx

from reconciler.actions import bounded


def test_a_cancel_as_the_answer_arrives_is_not_lost() -> None:
    # was: asyncio.wait_for (Python 3.11) returned the answer and dropped a cancel that
    # came as the exchange ended, so Dispatcher.close() waited out a 30 s retry backoff
    async def go() -> asyncio.Task[httpx.Response]:
        task: asyncio.Task[httpx.Response] | None = None

        def answer(request: httpx.Request) -> httpx.Response:
            assert task is not None
            task.cancel()  # the daemon stops just as the answer comes
            return httpx.Response(503, content=b"busy")

        async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
            task = asyncio.get_running_loop().create_task(
                bounded.request(client, "POST", "http://127.0.0.1:9/hook", deadline=5.0))
            await asyncio.wait([task], timeout=5.0)
        return task

    task = asyncio.run(go())
    assert task.done() and task.cancelled()
