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

import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import Started, StreamItem, fields
from reconciler.sources import select as select_mod
from reconciler.sources.fields import DEFAULT_MAX_BYTES, doc

if TYPE_CHECKING:
    import asyncio

    from reconciler.sources import process
    from reconciler.sources.context import SourceContext

MAX_BACKOFF = 60.0
STABLE_RUN = 30.0
FIRST_LINE_TIMEOUT = 10.0
KILL_WAIT = 5.0  # seconds to wait for a killed command's exit
DEFAULT_BACKOFF = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    """A ``command`` source: one long-running command, one observation per stdout line."""

    TYPE: ClassVar[str] = "command"
    KEYS: ClassVar[tuple[str, ...]] = (
        "type", "command", "backoff", "cwd", "env", "maxBytes")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    command: str | tuple[str, ...] = doc(
        "The long-running command: a string runs through /bin/sh -c; a list is "
        "argv (no shell).",
        "tail -F /var/log/syslog")
    cwd: str | None = doc("Working directory (~ expanded; relative to the repository "
                          "root). Default: the repository root.", "~/src/app", default=None)
    env: Mapping[str, str] = doc("Extra environment variables; values may use ${NAME}.",
                                 {"LC_ALL": "C"}, default_factory=dict)
    max_bytes: int = doc("The longest stdout line in bytes (default 1 MiB); a longer line "
                         "kills and restarts the command.", 65536, default=DEFAULT_MAX_BYTES)
    backoff: float = doc("First restart delay after the command exits; doubles up to 60s.",
                         "1s", default=DEFAULT_BACKOFF)
    select: str | None = doc(select_mod.DESCRIPTION.format(what="line"),
                             select_mod.EXAMPLE, default=None, optional=True)

    @property
    def interval(self) -> None:
        """A stream has no interval."""
        return None

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``command: tail -F log``."""
        return fields.describe(self.TYPE, fields.command_text(self.command), None)


Spec = CommandSpec
STREAM = True
"""Evaluated as a stream (``stream``), not polled."""


def normalize(raw: Mapping[str, Any]) -> CommandSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    return CommandSpec(
        command=fields.command(raw["command"]),
        cwd=raw.get("cwd"),
        env=fields.strings(raw.get("env")),
        max_bytes=int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        backoff=fields.dur(raw.get("backoff"), DEFAULT_BACKOFF),
        select=raw.get("select"),
    )


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """``select`` compiles (``sources.select.check``); durations are checked by all."""
    return select_mod.check(raw)


ADD = AddFlag("--watch", "CMD", "Each stdout line of a long-running CMD.")
"""``monitors add --watch CMD``."""


def from_flag(value: str, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--watch CMD``."""
    return {"type": CommandSpec.TYPE, "command": value}

class _LineTooLong(Exception):
    """A line passed the cap before its newline."""


async def _read_line(reader: asyncio.StreamReader, limit: int) -> bytes:
    """One line without its newline (b"" at EOF; a last line without newline as is).

    Raises:
        _LineTooLong: ``limit`` bytes came without a newline. Nothing more is read: the
            line may never end (``cat /dev/zero``).
    """
    import asyncio

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
    import asyncio

    from reconciler import processes
    from reconciler.sources import process

    spec = monitor.source
    assert isinstance(spec, CommandSpec)
    limit = spec.max_bytes
    base = spec.backoff or DEFAULT_BACKOFF
    delay = base
    while True:
        started = time.monotonic()
        try:
            # each start: an env ``${NAME}`` that is unset is a check error, then a retry
            child = await process.spawn(ctx.process_spec(spec), limit=limit + 1)
        except errors.SourceError as e:
            yield e
        else:
            stderr = process.Tail(process.STDERR_TAIL)
            drain = asyncio.ensure_future(_drain(child.stderr, stderr))
            stdout = child.stdout
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
                    line = Observation(process.decode(raw).rstrip("\r"), {"pid": child.pid})
                    if spec.select is None:
                        yield line
                    else:
                        try:
                            yield select_mod.observation(spec.select, line)
                        except errors.SourceError as e:
                            yield e
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
    from reconciler.sources import process

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
    import asyncio

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
