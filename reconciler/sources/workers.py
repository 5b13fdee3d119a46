"""A fixed set of worker tasks that run submitted jobs: a cap on work in flight.

``Workers(n).run(job, *args)`` awaits ``job(*args)`` in one of ``n`` worker tasks and
returns its result (or raises its exception) in the caller. At most ``n`` jobs run at
once; the others wait in a FIFO queue. A job that finds workers idle goes to the one
idle for the shortest time, so at a low rate one worker does the work and what it keeps
between jobs stays warm (an HTTP worker's kept-alive connections: ``sources.httppools``).

Why not a semaphore around the job in the caller's task: a caller woken by a released
semaphore runs one loop step later, while a worker takes the next job in the same step
in which it finished the previous one. For HTTP polls (``SourceContext.http_workers``)
that is the difference that matters: httpcore's pool hands an idle connection to
whichever request asks first, and marks it busy only a few steps later (after two lock
checkpoints), so requests that enter the pool in the steps after a release race for the
first idle connection and the loser retries. Measured on loopback with 4 in flight and
500 waiting polls: a semaphore gave one retry per request and ~20% more CPU per
request than a bare loop of httpx requests; workers give 0.03 retries, like the loop.
The job's own frames are also all a worker resumes at each of its awaits (not the
caller's chain of coroutines above it).

Cancelling a caller cancels its job: a queued job is dropped, a running one is
cancelled inside the worker (``CancelledError`` at the job's current await), and the
worker carries on with the next job. ``aclose`` cancels the workers; workers are made on
first use, on the running loop (again if the loop changes, for tests that run several).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[tuple[Workers, int] | None] = contextvars.ContextVar(
    "monitors_worker", default=None)


def current() -> tuple[Workers, int] | None:
    """``(workers, index)`` of the worker task running the calling code, or None outside
    a worker (what lets a job use per-worker state, as ``sources.httppools`` does)."""
    return _CURRENT.get()


class _Job:
    __slots__ = ("abandoned", "args", "fn", "future", "worker")

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...],
                 future: asyncio.Future[Any]) -> None:
        self.fn = fn
        self.args = args
        self.future = future
        self.worker: asyncio.Task[None] | None = None  # the worker running it, if any
        self.abandoned = False  # its caller was cancelled


class Workers:
    """``size`` worker tasks running submitted coroutine functions (see the module
    docstring).

    Args:
        size: jobs that may run at once (>= 1).
        name: the worker tasks' name prefix (shown in task dumps).
    """

    def __init__(self, size: int, *, name: str = "workers") -> None:
        if size < 1:
            raise ValueError(f"workers: size must be at least 1, got {size}")
        self.size = size
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: collections.deque[_Job] = collections.deque()
        self._idle: collections.deque[asyncio.Future[None]] = collections.deque()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    @property
    def queued(self) -> int:
        """Jobs waiting for a worker (running ones not counted)."""
        return len(self._queue)

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await ``fn(*args)`` in a worker; its result, or its exception raised here.

        Raises:
            whatever ``fn`` raises; ``asyncio.CancelledError`` when the caller is
            cancelled (the job is dropped or cancelled) or the workers are closed.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._start(loop)
        job = _Job(fn, args, loop.create_future())
        self._queue.append(job)
        idle = self._idle
        while idle:
            waiter = idle.pop()  # the worker idle the shortest time: its state is warmest
            if not waiter.done():
                waiter.set_result(None)
                break
        try:
            result: T = await job.future
            return result
        except asyncio.CancelledError:
            job.abandoned = True
            if job.worker is not None:  # running: a worker awaits inside fn right now
                job.worker.cancel()
            raise

    async def aclose(self) -> None:
        """Cancel the workers (running jobs are cancelled; queued ones too)."""
        self._closing = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks and self._loop is asyncio.get_running_loop():
            await asyncio.gather(*tasks, return_exceptions=True)
        for job in self._queue:
            job.future.cancel()
        self._queue.clear()
        self._loop = None
        self._closing = False

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue = collections.deque()
        self._idle = collections.deque()
        self._tasks = [loop.create_task(self._work(i), name=f"{self.name}:{i}")
                       for i in range(self.size)]

    async def _work(self, index: int) -> None:
        _CURRENT.set((self, index))  # this task's own context
        task = asyncio.current_task()
        assert task is not None
        queue, idle = self._queue, self._idle
        loop = asyncio.get_running_loop()
        while True:
            if not queue:
                waiter = loop.create_future()
                idle.append(waiter)
                await waiter
                continue
            job = queue.popleft()
            future = job.future
            if future.done():  # its caller was cancelled while it waited
                continue
            job.worker = task
            try:
                result = await job.fn(*job.args)
            except asyncio.CancelledError:
                job.worker = None
                if job.abandoned and not self._closing:
                    task.uncancel()  # the caller's cancellation, delivered in its job
                    continue
                future.cancel()
                if self._closing or task.cancelling():
                    raise  # the worker itself is cancelled (aclose, loop shutdown)
                continue  # the job cancelled itself: its caller sees CancelledError
            except Exception as e:
                job.worker = None
                if not future.done():
                    future.set_exception(e)
                continue
            job.worker = None
            if not future.done():
                future.set_result(result)
