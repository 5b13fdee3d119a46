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

The jobs are module-level functions of this module (they are pickled by name); this
module imports neither aiohttp nor the daemon, so the worker's start-up stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler import errors, redaction

if TYPE_CHECKING:
    from reconciler.settings import Settings

API_VERSION = "v1"
IDLE = 60.0
"""Seconds without a call after which the worker process is stopped."""

T = TypeVar("T")


def encode(data: Mapping[str, Any], redactor: redaction.Redactor) -> str:
    """The JSON answer of ``data`` with ``apiVersion`` first and every secret masked:
    on the text when no secret needs JSON escaping (one pass), else on the values
    before encoding."""
    document = {"apiVersion": API_VERSION, **data}
    secrets = redactor.secrets
    if not secrets:
        return json.dumps(document, ensure_ascii=False, default=str)
    if any(json.dumps(s)[1:-1] != s for s in secrets):
        return json.dumps(redactor.redact_value(document), ensure_ascii=False, default=str)
    return redactor.redact(json.dumps(document, ensure_ascii=False, default=str))


def rows_json(cfg: Settings, status: Mapping[str, Any], secrets: tuple[str, ...]) -> bytes:
    """Job: ``client.views.rows`` of this device as the encoded, redacted JSON answer of
    ``GET /v1/monitors`` (UTF-8 bytes).

    Raises:
        errors.MonitorsError: the state directory or layers are unreadable.
    """
    from reconciler.client import views

    return encode(views.rows(cfg, status=status), redaction.Redactor(secrets)).encode()


def _watch_parent(parent: int, every: float = 1.0) -> None:
    """Worker initializer: exit as soon as ``parent`` (the daemon) is gone. A spawned
    worker waits on its call queue forever otherwise, since it holds that pipe's write
    end too and never sees EOF.

    It also ignores SIGINT: a Ctrl-C in the terminal reaches the whole process group,
    and the daemon, which handles it, stops the worker; the worker's own
    ``KeyboardInterrupt`` would only print a traceback under the daemon's last lines.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

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
