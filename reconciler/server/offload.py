"""Answers computed in a helper process, so that they never hold the event loop's GIL.

``GET /v1/monitors``, ``/v1/fingerprints`` and the status page answer with
``client.views.rows``: a read of every layer, the registry and each monitor's state
(about 0.23 ms of CPU per monitor here: 230 ms for 1,000) and its JSON (800 KB). In a
thread of the daemon that work holds the interpreter lock the event loop needs:
measured under load (``bench/http_load.py``), loop steps waited 20-80 ms for it
(``json.dumps`` of the rows is one C call that never lets go) and polls started that
much late. A process of its own takes none of the daemon's GIL and runs on another
core.

The helper is one ``concurrent.futures.ProcessPoolExecutor`` worker, started with
``spawn`` (a fresh interpreter, never a fork of the threaded daemon) on first use and
stopped after ``IDLE`` seconds without one: a daemon nobody queries keeps no second
process. A call whose worker cannot start (out of file descriptors or processes, no
``/dev/shm``) or dies fails with ``errors.StateError`` (a 503 of one line) and the
next call starts a new worker. The worker exits within a second of the daemon's death
(even ``kill -9``: it watches its parent), so no helper outlives its daemon.

The jobs are module-level functions (pickled by name) of ``server.jobs``, which
imports neither aiohttp nor the daemon, so the worker's start-up stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from reconciler import errors

IDLE = 60.0
"""Seconds without a call after which the worker process is stopped."""
NICE = 10
"""Niceness the worker adds to its own (``nice(2)``): where CPU is short, the daemon's
polls (and the rest of the machine) go before views for HTTP clients, which then take
longer. At 10 a busy worker gets about a tenth of a core that a busy daemon wants too
(CFS weights 110 and 1024, ``sched_prio_to_weight``)."""

T = TypeVar("T")


def _watch_parent(parent: int, every: float = 1.0) -> None:
    """Worker initializer: exit as soon as ``parent`` (the daemon) is gone. A spawned
    worker waits on its call queue forever otherwise, since it holds that pipe's write
    end too and never sees EOF.

    It also ignores SIGINT: a Ctrl-C in the terminal reaches the whole process group,
    and the daemon, which handles it, stops the worker; the worker's own
    ``KeyboardInterrupt`` would only print a traceback under the daemon's last lines.
    And it lowers its own CPU priority by ``NICE``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(NICE)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(0)

    threading.Thread(target=watch, name="monitors:parent-watch", daemon=True).start()


class Offload:
    """The helper process (module docstring).

    Args:
        idle: seconds without a call before the worker stops.
    """

    def __init__(self, idle: float = IDLE) -> None:
        self._idle = idle
        self._pool: ProcessPoolExecutor | None = None
        self._calls = 0
        self._stopper: asyncio.TimerHandle | None = None
        self.started = 0
        """How many worker processes were started (a count)."""

    async def run(self, job: Callable[..., T], *args: Any) -> T:
        """``job(*args)`` in the worker process (started if needed).

        Raises:
            errors.StateError: the worker could not start (out of file descriptors or
                processes, no ``/dev/shm``) or died (killed, out of memory) during the
                call.
            errors.MonitorsError: what ``job`` raised.
        """
        loop = asyncio.get_running_loop()
        self._calls += 1
        pool = self._pool
        try:
            try:  # the pool's pipes and semaphores, and the worker's spawn on submit
                if pool is None:
                    pool = self._pool = ProcessPoolExecutor(
                        max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                        initializer=_watch_parent, initargs=(os.getpid(),))
                    self.started += 1
                call = loop.run_in_executor(pool, job, *args)
            except OSError as e:  # out of file descriptors or processes, no /dev/shm
                self._drop(pool)
                raise errors.StateError(f"the daemon's view worker could not start ({e}); "
                                        "the next request tries again") from e
            return await call
        except BrokenProcessPool as e:
            self._drop(pool)
            raise errors.StateError(f"the daemon's view worker stopped ({e}); "
                                    "the next request starts a new one") from e
        finally:
            self._calls -= 1
            if self._stopper is not None:
                self._stopper.cancel()
            self._stopper = loop.call_later(self._idle, self._stop_if_idle)

    def _drop(self, pool: ProcessPoolExecutor | None) -> None:
        """Forget a failed ``pool`` (the next call makes a new one) and stop it."""
        if pool is None:
            return
        if self._pool is pool:
            self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)

    def _stop_if_idle(self) -> None:
        self._stopper = None
        if self._calls == 0 and self._pool is not None:
            pool, self._pool = self._pool, None
            pool.shutdown(wait=False, cancel_futures=True)

    @property
    def pid(self) -> int | None:
        """The worker's process id while one runs (tests), else None."""
        processes = getattr(self._pool, "_processes", None) or {}
        return next(iter(processes), None)

    async def close(self, timeout: float = 5.0) -> None:
        """Stop the worker (the daemon is stopping): pending calls are cancelled and the
        worker is waited for up to ``timeout`` seconds (past that it exits by itself
        when the daemon does, ``_watch_parent``)."""
        if self._stopper is not None:
            self._stopper.cancel()
            self._stopper = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            stopping = asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping, timeout)
