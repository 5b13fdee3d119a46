"""Running watched commands: process groups, capped output, UTF-8 with replacement.

Shared by ``poll`` (run to completion) and ``command`` (long-running). Rules:

* a string command runs as ``/bin/sh -c STRING``; a list is argv (no shell);
* every command gets its own session (``start_new_session``), so a timeout or a
  stop kills the whole process group, grandchildren included (``killpg``);
* stdout is capped at ``maxBytes`` and decoded as UTF-8 with replacement whatever
  the locale. ``run``: once the cap is passed the rest is read and dropped for at
  most ``CAP_GRACE`` seconds while the command may still exit by itself; then its
  process group is killed and the capped output returned (``truncated``), so
  endless output (``yes``) is an observation, not a timeout;
* once the command exits, its output is drained for at most ``DRAIN_GRACE``
  seconds: a background grandchild that keeps the pipe open cannot hang a poll;
* a poll is run to completion: when ``run`` returns or raises (exit, cap, timeout,
  cancel) whatever is left of the command's process group is killed, so
  ``sleep 300 & echo started`` leaves no orphan behind;
* a spec the OS refuses (missing program, bad ``cwd``, a NUL byte or ``=`` in
  ``env``) is a check error of kind ``spawn``, never a foreign exception.

Spawning, process groups and waiting for the exit are ``reconciler.processes``'s,
shared with the ``run`` action.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors, processes
from reconciler.processes import Child

DRAIN_GRACE = 0.25
CAP_GRACE = 0.25
STDERR_TAIL = 2000
CHUNK = processes.CHUNK


def argv(command: str | list[str]) -> list[str]:
    """The argv for a spec's ``command``: ``/bin/sh -c`` for a string, as is for a list."""
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def environment(extra: Mapping[str, str]) -> dict[str, str] | None:
    """This process's environment plus ``extra`` (the spec's ``env``); None (inherit it
    as it is) when ``extra`` is empty: copying ``os.environ`` costs a decode per
    variable, about 0.3 ms a spawn."""
    if not extra:
        return None
    env = dict(os.environ)
    env.update(extra)
    return env


def working_dir(cwd: str | None) -> str | None:
    """The spec's ``cwd`` with ``~`` expanded, or None."""
    return str(Path(cwd).expanduser()) if cwd else None


async def spawn(spec: Mapping[str, Any], *, limit: int = CHUNK) -> Child:
    """Start ``spec["command"]`` in a new session with piped stdout and stderr
    (stdin is /dev/null; ``limit`` is the stream reader's line limit in bytes);
    see ``processes.spawn``.

    Raises:
        errors.SourceError: kind ``spawn`` when it cannot start (missing program,
            permission, bad ``cwd``).
    """
    args = argv(spec["command"])
    try:
        return await processes.spawn(args, cwd=working_dir(spec.get("cwd")),
                                     env=environment(spec.get("env") or {}), limit=limit)
    except OSError as e:
        what = e.strerror or str(e)
        target = e.filename or args[0]
        raise errors.SourceError(f"cannot start {args[0]!r}: {target}: {what}",
                                 kind="spawn") from e
    except (ValueError, TypeError) as e:  # a NUL byte or '=' in env, cwd or argv
        raise errors.SourceError(f"cannot start {args[0]!r}: {e}", kind="spawn",
                                 permanent=True) from None


def kill_group(child: Child) -> None:
    """SIGKILL the process group of ``child`` (its session), ignoring a vanished one."""
    processes.kill_group(child)


class Capped:
    """A byte buffer that keeps the first ``limit`` bytes and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.truncated = self.truncated or bool(chunk)
            return
        if len(chunk) > room:
            chunk = chunk[:room]
            self.truncated = True
        self.parts.append(chunk)
        self.size += len(chunk)

    def data(self) -> bytes:
        return b"".join(self.parts)


class Tail:
    """Keeps the last ``limit`` bytes (a stderr tail)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = b""

    def add(self, chunk: bytes) -> None:
        self.buf = (self.buf + chunk)[-self.limit :]


async def _pump(stream: asyncio.StreamReader | None, sink: Capped | Tail) -> None:
    if stream is None:
        return
    while True:
        chunk = await stream.read(CHUNK)
        if not chunk:
            return
        sink.add(chunk)


@dataclass(frozen=True, slots=True)
class Completed:
    """A finished run: decoded stdout, exit code, duration (s), stderr tail, truncated."""

    stdout: str
    exit_code: int
    duration: float
    stderr_tail: str
    truncated: bool


def decode(data: bytes) -> str:
    """UTF-8 with replacement (invalid bytes become U+FFFD), whatever the locale."""
    return data.decode("utf-8", errors="replace")


async def _pump_capped(stream: asyncio.StreamReader | None, sink: Capped) -> None:
    """Read into ``sink`` until EOF or until it is past its cap (``truncated``)."""
    if stream is None:
        return
    while not sink.truncated:
        chunk = await stream.read(CHUNK)
        if not chunk:
            return
        sink.add(chunk)


async def _discard(stream: asyncio.StreamReader | None) -> None:
    if stream is None:
        return
    while await stream.read(CHUNK):
        pass


async def run(spec: Mapping[str, Any], *, timeout: float, max_bytes: int) -> Completed:
    """Run ``spec["command"]`` to completion within ``timeout`` seconds.

    The process group is killed when this returns or raises (see the module
    docstring). Output past ``max_bytes`` is dropped; a command still writing
    ``CAP_GRACE`` seconds after passing the cap is killed and its capped output is
    returned (``truncated``; ``exit_code`` is then ``-9``, the signal).

    Raises:
        errors.SourceError: kind ``spawn`` (cannot start) or ``timeout`` (the process
            group was killed).
    """
    started = time.monotonic()
    child = await spawn(spec)
    out, err = Capped(max_bytes), Tail(STDERR_TAIL)
    stdout = asyncio.ensure_future(_pump_capped(child.stdout, out))
    readers = [stdout, asyncio.ensure_future(_pump(child.stderr, err))]
    try:
        try:
            async with asyncio.timeout(timeout):
                await asyncio.wait([stdout, child.exited], return_when=asyncio.FIRST_COMPLETED)
                if out.truncated and not child.exited.done():
                    # Past the cap: drop the rest briefly (it may be about to exit), then
                    # stop it. Endless output is an observation, not a timeout.
                    readers.append(asyncio.ensure_future(_discard(child.stdout)))
                    await asyncio.wait([child.exited], timeout=CAP_GRACE)
                    if not child.exited.done():
                        kill_group(child)
                code = await child.wait_exit()
        except TimeoutError:
            kill_group(child)
            await child.wait_exit()
            raise errors.SourceError(
                f"command did not finish within {timeout:g}s; process group killed",
                kind="timeout",
            ) from None
        # Drain what the command left in its pipes, but never wait on a background
        # grandchild that inherited them.
        remaining = max(0.0, timeout - (time.monotonic() - started))
        await asyncio.wait(readers, timeout=min(DRAIN_GRACE, remaining) or 0.01)
    finally:
        # Run to completion: nothing the poll started outlives it (also on cancel).
        kill_group(child)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        processes.close(child)
    return Completed(
        stdout=decode(out.data()),
        exit_code=code,
        duration=time.monotonic() - started,
        stderr_tail=decode(err.buf),
        truncated=out.truncated,
    )

