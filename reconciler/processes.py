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
  (``started(pid)`` once the child exists) and ended (``ended(pid)`` when its pipes
  are released, after its group was killed): the daemon records them to kill what
  a ``kill -9`` of it left behind (``daemon.orphans``);
* a pid is ``alive`` when it exists and is not a zombie (``/proc/<pid>/stat``
  state ``Z`` or ``X``), or when it belongs to another user (``EPERM``). Its
  ``start_time`` (field 22 of ``/proc/<pid>/stat``, clock ticks since boot; see
  proc(5)) tells a reused pid from the process first seen with it.

Spawns use the default asyncio loop (uvloop forks and spawned far slower with a
large parent, measured). On Python 3.11 its default child watcher starts one thread
per child (``ThreadedChildWatcher``; the main thread waits for each to start);
``use_pidfd_watcher`` swaps in ``asyncio.PidfdChildWatcher`` (Linux 5.3+), which
Python 3.12 uses by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

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

    def started(self, pid: int) -> None:
        """The group ``pid`` (its leader's pid) was started."""

    def ended(self, pid: int) -> None:
        """The group ``pid`` was killed and its leader's pipes released."""


tracker: Tracker | None = None
"""Set by the daemon while it runs (``daemon.orphans``); None: nothing is told."""


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The stream protocol plus a future set when the process exits (pipes may stay open)."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


@dataclass(eq=False)
class Child:
    """A started command: the asyncio ``Process`` and a future done at its exit."""

    proc: asyncio.subprocess.Process
    exited: asyncio.Future[None]

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self.proc.pid

    async def wait_exit(self) -> int:
        """The exit code (negative: the signal), as soon as the direct child exits."""
        await asyncio.shield(self.exited)
        code = self.proc.returncode
        if code is None:
            transport = getattr(self.proc, "_transport", None)
            code = transport.get_returncode() if transport is not None else None
        return -1 if code is None else int(code)


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

    Args:
        cwd: working directory, None for this process's.
        env: the complete child environment; None: this process's own (inherited).
        limit: the stdout reader's line limit in bytes (at least ``CHUNK``).

    Raises:
        OSError: the OS refused (missing program, permission, bad ``cwd``).
        ValueError, TypeError: a NUL byte or ``=`` in ``env``, ``cwd`` or ``argv``.
    """
    loop = asyncio.get_running_loop()
    size = max(limit, CHUNK)
    starting = asyncio.ensure_future(loop.subprocess_exec(
        lambda: _Protocol(size, loop),
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    ))
    try:
        # Shielded: a cancel arriving while the child is being set up must not leave it
        # running. asyncio would kill only the direct child (``sh``), and
        # ``sh -c "sleep 100; ..."`` may already have started ``sleep`` in its group.
        transport, protocol = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            transport, _ = await starting
            _killpg(transport.get_pid(), signal.SIGKILL)
            transport.close()
        raise
    if tracker is not None:
        tracker.started(transport.get_pid())
    return Child(asyncio.subprocess.Process(transport, protocol, loop), protocol.exited)


def _killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_group(child: Child, sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group of ``child`` (its session), ignoring a vanished one."""
    _killpg(child.pid, sig)


def close(child: Child) -> None:
    """Release ``child``'s pipes (and kill it if it still runs). Idempotent."""
    transport = getattr(child.proc, "_transport", None)
    if transport is not None:
        transport.close()
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
