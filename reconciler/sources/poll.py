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

from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.model import Monitor, Observation
from reconciler.sources import process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

SHELL_START_FAILURES = {126: "not executable", 127: "command not found"}
"""Exit statuses with which ``sh -c`` says the command did not start (POSIX)."""


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Run the command once.

    Raises:
        errors.SourceError: kind ``spawn`` (cannot start; for a shell command also
            exit 126 or 127) or ``timeout``.
    """
    spec = ctx.process_spec(monitor.source)
    done = await process.run(spec, timeout=float(spec["timeout"]),
                             max_bytes=int(spec["maxBytes"]))
    if isinstance(spec["command"], str) and done.exit_code in SHELL_START_FAILURES:
        tail = done.stderr_tail.strip().splitlines()
        detail = f": {tail[-1][:300]}" if tail else ""
        raise errors.SourceError(
            f"command could not start (sh exit {done.exit_code}: "
            f"{SHELL_START_FAILURES[done.exit_code]}){detail}", kind="spawn")
    return Observation(
        done.stdout,
        {
            "exitCode": done.exit_code,
            "duration": round(done.duration, 4),
            "stderrTail": done.stderr_tail,
            "truncated": done.truncated,
        },
    )
