"""Start a coroutine at once, on the caller's stack, and make it a task only if it waits.

``start`` is Python 3.12's eager tasks (``asyncio.eager_task_factory``) for one
coroutine, on 3.11: the coroutine runs until its first suspension right away; when it
finishes without suspending (a poll whose source answers from memory, an unchanged
decision, a heartbeat), no ``asyncio.Task`` is made, scheduled or tracked at all (about
5 us of CPU per poll here, a fifth of a 10,000-monitor engine's cost); when it
suspends, an ``asyncio.Task`` carries on from that point, so cancelling, awaiting and
``current_task`` work as for any task from then on.

The one difference from a task: until its first suspension the coroutine runs outside
any task (``asyncio.current_task()`` is the caller's, None in a loop callback), in the
caller's ``contextvars`` context. So only code that needs no task before it first waits
may be started this way: ``asyncio.timeout``, anyio and httpx need one (a source type
declares that it needs none with ``EAGER``: ``sources.registry.is_eager``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


def start(coro: Coroutine[Any, Any, T], *, loop: asyncio.AbstractEventLoop,
          name: str | None = None) -> asyncio.Task[T] | None:
    """Run ``coro`` now until it first suspends (see the module docstring).

    Returns:
        None when ``coro`` returned (its value is dropped), else the task (named
        ``name``) that runs the rest of it.

    Raises:
        what ``coro`` raises before it first suspends (as a plain call would).
    """
    try:
        waiting = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_rest(coro, waiting), name=name)


async def _rest(coro: Coroutine[Any, Any, T], waiting: Any) -> T:
    return await _Continued(coro, waiting)


class _Continued(Generic[T]):
    """Awaitable: the rest of a coroutine that already yielded ``waiting`` (the future it
    waits on, or None for a bare yield) to the task running it, forwarding what the
    task sends or throws in, as ``await coro`` would (PEP 380's ``yield from``)."""

    __slots__ = ("_coro", "_waiting")

    def __init__(self, coro: Coroutine[Any, Any, T], waiting: Any) -> None:
        self._coro = coro
        self._waiting = waiting

    def __await__(self) -> Generator[Any, Any, T]:
        coro, waiting = self._coro, self._waiting
        self._waiting = None
        while True:
            try:
                sent = yield waiting
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # a cancellation, thrown into the coroutine
                try:
                    waiting = coro.throw(e)
                except StopIteration as done:
                    return cast(T, done.value)
            else:
                try:
                    waiting = coro.send(sent)
                except StopIteration as done:
                    return cast(T, done.value)
