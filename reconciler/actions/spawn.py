"""Spawn a ``run`` or ``routine`` command with the rendered prompt as one argv element.

The runtime half of the ``run`` and ``routine`` action types (their declarative
half is ``actions.run`` and ``actions.routine``). Never a shell: the argv goes to
``processes.spawn`` (the mechanism the ``poll`` and ``command`` sources use). The
child runs in its own session (process group) with stdin closed; stdout and stderr
are captured together, capped, redacted, and written to ``output.log`` beside the
fire record when it ends.

The run ends when the direct child exits, not when its pipe closes: a background
child (``sleep 300 & echo hi``) cannot keep it "running" or block the next fire
under ``overlap: skip``. When the run ends, however it ends (exit, failure,
timeout, shutdown), its whole process group is killed, so nothing it started
outlives it. A timeout first sends SIGTERM to the group, then SIGKILL after a
grace period. ``execute`` serves ``run`` and ``routine``; ``actions.jobs`` owns overlap
and the fire record.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler import processes
from reconciler.actions.options import Redactor

DEFAULT_MAX_OUTPUT = 1024 * 1024  # bytes kept in output.log
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
DRAIN_AFTER_EXIT = 0.25  # seconds to read on after the child exits (grandchildren)
_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one spawned command ended.

    Attributes:
        exit_code: the exit status, negative for a signal, None if it never started.
        duration: seconds from spawn to exit.
        output_bytes: bytes of output produced (before the cap).
        truncated: output was longer than the cap.
        timed_out: the timeout killed the process group.
        error: why it could not start (``spawn: ...``), else None.
    """

    exit_code: int | None
    duration: float
    output_bytes: int
    truncated: bool
    timed_out: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Exit code 0 without a timeout."""
        return self.exit_code == 0 and not self.timed_out and self.error is None


async def execute(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    write_output: Callable[[bytes], object],
    redactor: Redactor,
    max_bytes: int = DEFAULT_MAX_OUTPUT,
    kill_grace: float = KILL_GRACE,
    on_start: Callable[[int], None] | None = None,
) -> RunOutcome:
    """Run ``argv`` (no shell) to completion or ``timeout`` seconds and record its output.

    Args:
        argv: the full argv; ``argv[0]`` is looked up on ``PATH`` of ``env``.
        cwd: working directory (already expanded).
        env: the complete child environment.
        write_output: writes the capped, redacted output when it ends (the fire's
            ``output.log``, durably: ``Store.write_fire_file``).
        on_start: called with the child's pid once it runs.

    Never raises for a child that fails to start or misbehaves: that is the
    outcome. Cancellation kills the process group and re-raises.
    """
    started = time.monotonic()
    try:
        child = await processes.spawn(argv, cwd=cwd, env=env, stderr=asyncio.subprocess.STDOUT)
    except (OSError, ValueError, TypeError) as e:
        what = (e.strerror or str(e)) if isinstance(e, OSError) else str(e)
        reason = f"spawn: {argv[0]}: {what} (cwd {cwd})"
        await asyncio.to_thread(write_output, redactor.redact(reason + "\n").encode())
        return RunOutcome(None, time.monotonic() - started, 0, False, error=reason)
    if on_start is not None:
        on_start(child.pid)
    kept = bytearray()
    total = 0

    async def read() -> None:
        nonlocal total
        while chunk := await child.stdout.read(_CHUNK):
            total += len(chunk)
            room = max_bytes - len(kept)
            if room > 0:
                kept.extend(chunk[:room])

    reader = asyncio.ensure_future(read())
    timed_out = False
    code: int | None = None
    try:
        try:
            code = await asyncio.wait_for(child.wait_exit(), timeout)
        except TimeoutError:
            timed_out = True
            processes.kill_group(child, signal.SIGTERM)
            try:
                code = await asyncio.wait_for(child.wait_exit(), kill_grace)
            except TimeoutError:
                processes.kill_group(child, signal.SIGKILL)
                code = await child.wait_exit()
        # The direct child has exited: the action is over. Read what it left in the pipe,
        # but never wait on a background grandchild that inherited it.
        await asyncio.wait([reader], timeout=DRAIN_AFTER_EXIT)
    finally:
        # Whatever ended it (exit, timeout, cancel at shutdown): nothing it started lives on.
        await processes.finish(child, grace=kill_grace)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    duration = time.monotonic() - started
    truncated = total > max_bytes
    # Redacted before the notes: a secret cut by the cap is masked too (``cut``).
    text = redactor.redact(kept.decode("utf-8", errors="replace"), cut=truncated)
    if truncated:
        text += f"\n[output truncated: {total} bytes, first {max_bytes} kept]\n"
    if timed_out:
        text += f"\n[timed out after {timeout:g}s: process group killed]\n"
    await asyncio.to_thread(write_output, text.encode("utf-8"))
    return RunOutcome(code, duration, total, truncated, timed_out=timed_out)
