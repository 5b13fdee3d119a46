"""``command``: one long-running command; each stdout line is an observation.

``stream`` starts the command (own process group, see ``sources.process``),
yields ``Started``, then one ``Observation`` per line. When the command exits, or
writes a line longer than ``maxBytes`` (a check error of kind ``line-too-long``
naming the cap; the command is killed, as one endless line such as
``cat /dev/zero`` would otherwise be read forever), it yields a check error and
restarts the command after a backoff that doubles from ``backoff`` up to
``MAX_BACKOFF`` (reset once a run lasted ``STABLE_RUN`` seconds). Closing the
stream kills the process group.

``observe`` (used by ``monitors test``) runs the command until its first line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from reconciler import errors, processes
from reconciler.model import Monitor, Observation
from reconciler.sources import Started, StreamItem, process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

MAX_BACKOFF = 60.0
STABLE_RUN = 30.0
FIRST_LINE_TIMEOUT = 10.0
KILL_WAIT = 5.0  # seconds to wait for a killed command's exit


class _LineTooLong(Exception):
    """A line passed the cap before its newline."""


async def _read_line(reader: asyncio.StreamReader, limit: int) -> bytes:
    """One line without its newline (b"" at EOF; a last line without newline as is).

    Raises:
        _LineTooLong: ``limit`` bytes came without a newline. Nothing more is read: the
            line may never end (``cat /dev/zero``).
    """
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        line = e.partial + b"\n"
    except asyncio.LimitOverrunError:
        raise _LineTooLong from None
    if len(line) - 1 > limit:
        raise _LineTooLong
    return line[:-1]


async def stream(monitor: Monitor, ctx: SourceContext) -> AsyncGenerator[StreamItem, None]:
    """Yield ``Started``, observations (one per line) and check errors forever.

    The caller stops the stream with ``aclose()`` (or by cancelling its task); the
    process group is killed then.
    """
    limit = int(monitor.source["maxBytes"])
    base = float(monitor.source.get("backoff") or 1.0)
    delay = base
    while True:
        started = time.monotonic()
        try:
            # each start: an env ``${NAME}`` that is unset is a check error, then a retry
            spec = ctx.process_spec(monitor.source)
            child = await process.spawn(spec, limit=limit + 1)
        except errors.SourceError as e:
            yield e
        else:
            stderr = process.Tail(process.STDERR_TAIL)
            drain = asyncio.ensure_future(_drain(child.proc.stderr, stderr))
            stdout = child.proc.stdout or asyncio.StreamReader()  # always piped by spawn
            too_long = False
            code = -1
            try:
                yield Started(child.pid)
                while True:
                    read = asyncio.ensure_future(_read_line(stdout, limit))
                    if not child.exited.done():
                        either: list[asyncio.Future[Any]] = [read, child.exited]
                        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                    if not read.done():
                        # Exited: drain briefly, never wait on a grandchild holding stdout.
                        await asyncio.wait([read], timeout=process.DRAIN_GRACE)
                        if not read.done():
                            read.cancel()
                            break
                    try:
                        raw = read.result()
                    except _LineTooLong:
                        too_long = True
                        break
                    if not raw and stdout.at_eof():
                        break
                    yield Observation(process.decode(raw).rstrip("\r"), {"pid": child.pid})
                if not too_long:
                    code = await child.wait_exit()
            finally:
                drain.cancel()
                await processes.finish(child, grace=KILL_WAIT)
            if too_long:
                yield errors.SourceError(
                    f"a line longer than maxBytes ({limit} bytes); command killed, "
                    "restarting", kind="line-too-long")
            else:
                tail = process.decode(stderr.buf).strip().splitlines()
                last = f": {tail[-1][:200]}" if tail else ""
                yield errors.SourceError(f"command exited with code {code}{last}; restarting",
                                         kind="exited")
        if time.monotonic() - started >= STABLE_RUN:
            delay = base
        await asyncio.sleep(delay)
        delay = min(MAX_BACKOFF, delay * 2)


async def _drain(reader: asyncio.StreamReader | None, sink: process.Tail) -> None:
    if reader is None:
        return
    while chunk := await reader.read(process.CHUNK):
        sink.add(chunk)


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Run the command until its first stdout line (at most ``FIRST_LINE_TIMEOUT`` s).

    Raises:
        errors.SourceError: it could not start, exited without a line, or printed
            nothing in time.
    """
    items = stream(monitor, ctx)
    try:
        async with asyncio.timeout(FIRST_LINE_TIMEOUT):
            async for item in items:
                if isinstance(item, errors.SourceError):
                    raise item
                if isinstance(item, Observation):
                    return item
    except TimeoutError:
        raise errors.SourceError(
            f"no output line within {FIRST_LINE_TIMEOUT:g}s", kind="timeout"
        ) from None
    finally:
        await items.aclose()
    raise errors.SourceError("command stream ended", kind="exited")
