"""OS processes: children in their own process group, and whether a pid is alive (Linux).

One mechanism for everything that starts a command (the ``poll`` and ``command``
sources through ``sources.process``, the ``run`` and ``routine`` actions through
``actions.run``) and everything that asks about a pid (the ``pid`` source and
``add --watch-pid``). A leaf: it imports nothing of the package, knows no monitor,
source or action, and raises only the OS's exceptions.

Rules:

* every child gets its own session (``start_new_session``), so its process group
  (pgid = its pid) holds everything it starts; ``kill_group`` ends them all;
* ``Child.wait_exit`` returns when the direct child exits. ``Process.wait()``
  (Python 3.11) also waits until every pipe is closed, which a background
  grandchild holding stdout (``sleep 300 & echo hi``) delays until it exits;
* a cancel arriving while a child is being set up kills its group, never leaves
  it running; ``close`` releases the pipes so no transport is finalized after the
  event loop closed ("Event loop is closed");
* ``tracker`` (None by default), when set, hears of every group started
  (``started(pid, start)`` once the child exists) and ended (``ended(pid)`` when its pipes
  are released, after its group was killed): the daemon records them to kill what
  a ``kill -9`` of it left behind (``daemon.orphans``);
* a pid is ``alive`` when it exists and is not a zombie (``/proc/<pid>/stat``
  state ``Z`` or ``X``), or when it belongs to another user (``EPERM``). Its
  ``start_time`` (field 22 of ``/proc/<pid>/stat``, clock ticks since boot; see
  proc(5)) tells a reused pid from the process first seen with it.

``spawn`` starts each child (``subprocess.Popen``, which uses vfork here) on one of
``SPAWN_THREADS`` threads: the caller waits until the child has exec'd, 1-2 ms, so
a burst of starts on the event loop thread ran one after another and stalled every
other task (``run --once`` on 100 command monitors: measured in
``bench/once_vs_urlwatch.py``). The running loop then reads the pipes
(``connect_read_pipe``) and hears of the exit through a pidfd (Linux 5.3+; one
waiting thread per child without). uvloop forked and spawned far slower with a
large parent (measured). Other children of asyncio (``create_subprocess_exec``)
use its child watcher: on Python 3.11 one thread per child
(``ThreadedChildWatcher``); ``use_pidfd_watcher`` swaps in
``asyncio.PidfdChildWatcher`` (Linux 5.3+), which Python 3.12 uses by default.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

PID_MAX = 4194304
"""Linux's largest ``pid_max`` (``kernel/pid.c``: ``PID_MAX_LIMIT``)."""

CHUNK = 65536  # bytes per read, and the smallest stream buffer


def use_pidfd_watcher() -> bool:
    """Watch children with pidfds instead of a thread each (Python 3.11 on Linux 5.3+;
    see the module docstring). Call before the event loop starts; True when in use
    (on 3.12+ the loop already does this itself and nothing is changed)."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # an older kernel, or a seccomp filter refusing it
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
    return True


class Tracker(Protocol):
    """Told of every process group ``spawn`` starts and ``close`` ends; never raises."""

    def started(self, pid: int, start: int | None = None) -> None:
        """The group ``pid`` (its leader's pid) was started; ``start``: the leader's
        ``start_time`` when known (None: the tracker reads it)."""

    def ended(self, pid: int) -> None:
        """The group ``pid`` was killed and its leader's pipes released."""


tracker: Tracker | None = None
"""Set by the daemon while it runs (``daemon.orphans``); None: nothing is told."""


SPAWN_THREADS = 4
"""Threads that start children (``spawn``). Starting one blocks its caller until the
child has exec'd (vfork, about 1-2 ms each here): on the event loop that serialises a
burst of first polls and stalls every other task; on a few threads they overlap."""

_spawner: concurrent.futures.ThreadPoolExecutor | None = None


def _spawn_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _spawner
    if _spawner is None:
        _spawner = concurrent.futures.ThreadPoolExecutor(SPAWN_THREADS, "spawn")
    return _spawner


@dataclass(eq=False)
class Child:
    """A started command: its ``Popen``, stream readers on its pipes, and a future done
    at its exit (set by the event loop; the pipes may stay open longer).

    ``stderr`` is None when stderr was merged into stdout.
    """

    popen: subprocess.Popen[bytes]
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader | None
    exited: asyncio.Future[None]
    pipes: list[asyncio.BaseTransport] = field(default_factory=list)
    pidfd: int | None = None

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self.popen.pid

    async def wait_exit(self) -> int:
        """The exit code (negative: the signal), as soon as the direct child exits."""
        await asyncio.shield(self.exited)
        code = self.popen.returncode
        return -1 if code is None else int(code)


def _popen(argv: Sequence[str], cwd: str | None, env: Mapping[str, str] | None,
           stderr: int) -> tuple[subprocess.Popen[bytes], int | None]:
    """The started child and, when a ``tracker`` listens, its start time (read here,
    on the spawn thread: a ``/proc`` read per child on the event loop delayed every
    other task in a burst of starts)."""
    popen = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
        cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True)
    return popen, (start_time(popen.pid) if tracker is not None else None)


def _watch_exit(child: Child, loop: asyncio.AbstractEventLoop) -> None:
    """Set ``child.exited`` once the child exits and is reaped: a pidfd read by the
    event loop (Linux 5.3+; ``child.pidfd`` until then), else one waiting thread."""
    try:
        fd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # no pidfd: an older kernel or a seccomp filter
        _reap_in_thread(child.popen, loop, child.exited)
        return

    def readable() -> None:
        _unwatch(child, loop)
        if child.popen.poll() is not None and not child.exited.done():
            child.exited.set_result(None)

    child.pidfd = fd
    loop.add_reader(fd, readable)


def _unwatch(child: Child, loop: asyncio.AbstractEventLoop) -> None:
    if child.pidfd is not None:
        if not loop.is_closed():
            loop.remove_reader(child.pidfd)
        os.close(child.pidfd)
        child.pidfd = None


def _reap_in_thread(popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop,
                    exited: asyncio.Future[None] | None) -> None:
    """Wait for ``popen`` on a thread of its own (it reaps even after the loop closed),
    then set ``exited`` on the loop when given and still open."""

    def done() -> None:
        if exited is not None and not exited.done():
            exited.set_result(None)

    def wait() -> None:
        popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(done)

    threading.Thread(target=wait, name=f"reap-{popen.pid}", daemon=True).start()


async def spawn(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str] | None,
    stderr: int = asyncio.subprocess.PIPE,
    limit: int = CHUNK,
) -> Child:
    """Start ``argv`` (no shell) in a new session: stdin /dev/null, stdout piped, stderr
    piped (or ``asyncio.subprocess.STDOUT``: merged into stdout).

    The child is started on one of ``SPAWN_THREADS`` threads, so a burst of starts
    overlaps and never blocks the event loop; its pipes and its exit are then watched
    by the running loop.

    Args:
        cwd: working directory, None for this process's.
        env: the complete child environment; None: this process's own (inherited).
        limit: the stdout reader's line limit in bytes (at least ``CHUNK``).

    Raises:
        OSError: the OS refused (missing program, permission, bad ``cwd``).
        ValueError, TypeError: a NUL byte or ``=`` in ``env``, ``cwd`` or ``argv``.
    """
    loop = asyncio.get_running_loop()
    starting = loop.run_in_executor(_spawn_pool(), _popen, argv, cwd, env, stderr)
    try:
        # Shielded: a cancel arriving while the child is being set up must not leave it
        # running (``sh -c "sleep 100; ..."`` may already have started ``sleep`` in
        # its group): once it exists, its group is killed and its pipes closed.
        popen, started = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            popen, _ = await starting
            _killpg(popen.pid, signal.SIGKILL)
            _close_files(popen)
            _reap_in_thread(popen, loop, None)
        raise
    if tracker is not None:
        tracker.started(popen.pid, started)
    exited: asyncio.Future[None] = loop.create_future()
    size = max(limit, CHUNK)
    child = Child(popen, asyncio.StreamReader(size, loop), None, exited)
    _watch_exit(child, loop)
    try:
        await _connect(loop, child, child.stdout, popen.stdout)
        if popen.stderr is not None:
            child.stderr = asyncio.StreamReader(size, loop)
            await _connect(loop, child, child.stderr, popen.stderr)
    except BaseException:
        _killpg(popen.pid, signal.SIGKILL)
        close(child)
        raise
    return child


async def _connect(loop: asyncio.AbstractEventLoop, child: Child,
                   reader: asyncio.StreamReader, pipe: IO[bytes] | None) -> None:
    assert pipe is not None  # spawn pipes stdout (and stderr unless merged)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    child.pipes.append(transport)


def _close_files(popen: subprocess.Popen[bytes]) -> None:
    for pipe in (popen.stdout, popen.stderr):
        if pipe is not None:
            pipe.close()


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_group(child: Child, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group of ``child`` (its session), ignoring a vanished one."""
    _killpg(child.pid, sig)


def close(child: Child) -> None:
    """Release ``child``'s pipes (and kill it if it still runs). Idempotent."""
    popen, loop = child.popen, child.exited.get_loop()
    if popen.poll() is None:  # still running, or not yet reaped
        with contextlib.suppress(ProcessLookupError):
            popen.kill()
        if child.pidfd is not None:  # reaped on a thread: the loop may close first
            _unwatch(child, loop)
            _reap_in_thread(popen, loop, child.exited)
    elif child.pidfd is not None:
        _unwatch(child, loop)
        if not child.exited.done():
            child.exited.set_result(None)
    for transport in child.pipes:
        transport.close()
    _close_files(child.popen)  # those not handed to a transport yet
    if tracker is not None:
        tracker.ended(child.pid)


async def finish(child: Child, *, grace: float) -> None:
    """The end of a child's life, whatever ended it (exit, cap, timeout, cancel): kill
    its whole process group, wait up to ``grace`` seconds for the direct child's exit,
    and release its pipes (also when cancelled while waiting)."""
    kill_group(child)
    try:
        if not child.exited.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(child.exited), grace)
    finally:
        close(child)


# -- pids -----------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (after the command name), None when unreadable.

    The command name (field 2) is in parentheses and may itself contain spaces and
    parentheses, so the split is after its last ``)`` (proc(5)).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``),
    or None when it cannot be read (no such process, no ``/proc``)."""
    if not 0 < pid <= PID_MAX:
        return None
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])  # field 22; fields[0] is field 3
    except ValueError:
        return None


def alive(pid: int) -> bool:
    """True when ``pid`` (``1..PID_MAX``; others are never alive: 0 and negative numbers
    address process groups in kill(2)) exists and is not a zombie. A process of
    another user (``EPERM``) is alive."""
    if not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    return fields is None or fields[:1] not in (["Z"], ["X"])
