"""``poll``: a command re-run every interval; its stdout is the observation.

Any exit code is an observation (``exitCode``, ``duration`` in seconds,
``stderrTail`` and ``truncated`` go into meta). Failing to start or a timeout is a
check error; on timeout the whole process group is killed. See
``sources.process`` for output capping and decoding.

For the string (shell) form the shell itself reports a command that could not
start: exit status 127 (not found) or 126 (found but not executable), as POSIX
specifies for ``sh`` (XCU 2.8.2). Those two are check errors of kind ``spawn``
(with the stderr tail), like the argv form's failed ``exec``, so a missing tool
counts towards the drought notice instead of looking like a normal observation.
"""


from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import durations, errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.sources import select as select_mod
from reconciler.sources.fields import DEFAULT_MAX_BYTES, doc

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

TIMEOUT_CAP = 60.0
"""Seconds: the default ``timeout`` is the interval, at most this."""

SHELL_START_FAILURES = {126: "not executable", 127: "command not found"}
"""Exit statuses with which ``sh -c`` says the command did not start (POSIX)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PollSpec:
    """A ``poll`` source: ``command`` re-run every ``interval`` seconds."""

    TYPE: ClassVar[str] = "poll"
    KEYS: ClassVar[tuple[str, ...]] = (
        "type", "command", "interval", "timeout", "cwd", "env", "maxBytes", "select")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    command: str | tuple[str, ...] = doc(
        "The command: a string runs through /bin/sh -c; a list is argv (no shell).",
        "git rev-parse HEAD")
    interval: float = doc("How often to run the command (500ms..7d).", "30s")
    timeout: float = doc("Kill the command (its whole process group) after this long; "
                         "a check error. Default: the interval, at most 60s.", "10s")
    cwd: str | None = doc("Working directory (~ expanded; relative to the repository "
                          "root). Default: the repository root.", "~/src/app", default=None)
    env: Mapping[str, str] = doc("Extra environment variables; values may use ${NAME}.",
                                 {"LC_ALL": "C"}, default_factory=dict)
    max_bytes: int = doc("Output cap in bytes (default 1 MiB); past it meta.truncated "
                         "is true.", 65536, default=DEFAULT_MAX_BYTES)
    select: str | None = doc(select_mod.DESCRIPTION.format(what="stdout"),
                             select_mod.EXAMPLE, default=None, optional=True)

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``poll: git rev-parse HEAD every 30s``."""
        return fields.describe(self.TYPE, fields.command_text(self.command), self.interval)


Spec = PollSpec


def normalize(raw: Mapping[str, Any]) -> PollSpec:
    """The spec of a schema-valid ``source`` mapping (defaults filled, durations in seconds).

    Raises:
        ValueError: a duration does not parse.
    """
    interval = durations.parse(raw["interval"])
    return PollSpec(
        command=fields.command(raw["command"]),
        interval=interval,
        timeout=fields.dur(raw.get("timeout"), min(interval, TIMEOUT_CAP)),
        cwd=raw.get("cwd"),
        env=fields.strings(raw.get("env")),
        max_bytes=int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        select=raw.get("select"),
    )


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """``select`` compiles (``sources.select.check``); durations are checked by all."""
    return select_mod.check(raw)


ADD = AddFlag("--poll", "CMD INTERVAL", "Re-run CMD every INTERVAL.", nargs=2)
"""``monitors add --poll CMD INTERVAL``."""


def from_flag(value: tuple[str, str], *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--poll CMD INTERVAL``.

    Raises:
        errors.UsageError: the interval does not parse or is out of range.
    """
    return {"type": PollSpec.TYPE, "command": value[0],
            "interval": fields.interval_flag(value[1], "--poll")}

async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Run the command once.

    Raises:
        errors.SourceError: kind ``spawn`` (cannot start; for a shell command also
            exit 126 or 127) or ``timeout``.
    """
    from reconciler.sources import process

    spec = monitor.source
    assert isinstance(spec, PollSpec)
    done = await process.run(ctx.process_spec(spec), timeout=spec.timeout,
                             max_bytes=spec.max_bytes)
    if isinstance(spec.command, str) and done.exit_code in SHELL_START_FAILURES:
        tail = done.stderr_tail.strip().splitlines()
        detail = f": {tail[-1][:300]}" if tail else ""
        raise errors.SourceError(
            f"command could not start (sh exit {done.exit_code}: "
            f"{SHELL_START_FAILURES[done.exit_code]}){detail}", kind="spawn")
    observed = Observation(
        done.stdout,
        {
            "exitCode": done.exit_code,
            "duration": round(done.duration, 4),
            "stderrTail": done.stderr_tail,
            "truncated": done.truncated,
        },
    )
    return observed if spec.select is None else select_mod.observation(spec.select, observed)
