"""Runs of ``run`` and ``routine`` fires: overlap (skip, queue, parallel) and the process.

One ``Runs`` per dispatcher. ``admit`` starts, queues or skips a fire by its
command's ``overlap``; a started run writes the prompt file, makes ``dispatched``
durable before the spawn (at-most-once: a crash after it never leads to a second
spawn) and ends the record from the ``spawn.execute`` outcome. Cancelled at
shutdown, the run's process group is killed and the fire marked ``interrupted``.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import errors, timestamps
from reconciler.actions import agents, options, spawn
from reconciler.actions.options import CommandSpec
from reconciler.actions.records import OUTPUT_FILE, PROMPT_FILE, FireStatus, fire_dir
from reconciler.events import Event
from reconciler.model import Monitor

if TYPE_CHECKING:
    from reconciler.actions.dispatch import Dispatcher

LOG = logging.getLogger("monitors.actions")
MAX_QUEUE = 100  # queued runs per monitor (overlap: queue); further fires are skipped


@dataclass(frozen=True, slots=True)
class Job:
    """One admitted run: the fire, its resolved command and its rendered (redacted) prompt."""

    monitor: Monitor
    event: Event
    kind: str
    spec: CommandSpec
    prompt: str


class Runs:
    """The runs of one dispatcher (``d``: its records, tasks, environment and limits)."""

    def __init__(self, d: Dispatcher) -> None:
        self.d = d
        self._running: dict[str, set[str]] = collections.defaultdict(set)
        self._queued: dict[str, collections.deque[Job]] = collections.defaultdict(
            collections.deque
        )

    async def admit(self, monitor: Monitor, event: Event, *, kind: str, spec: CommandSpec,
                    prompt: str) -> None:
        """Start, queue or skip a run. Record writes of one fire never overlap: a queued
        fire's record is written before the fire can be started."""
        job = Job(monitor, event, kind, spec, self.d.redactor.redact(prompt))
        name = job.monitor.name
        running = self._running.get(name)
        if running and job.spec.overlap != "parallel":
            behind = sorted(running)[-1]
            if job.spec.overlap == "queue" and len(self._queued[name]) < MAX_QUEUE:
                await self.d.update(name, job.event.id, action=job.kind, queuedBehind=behind,
                                    reason=f"queued (overlap: queue) behind {behind}")
                if self._running.get(name) or self._queued[name]:
                    self._queued[name].append(job)
                    self._start_next(name)  # no-op while a run is going
                    return
                # the previous run ended while the record was written: start now
            else:
                why = ("queue full" if job.spec.overlap == "queue"
                       else f"overlap: skip: run {behind} still running")
                await self.d.finish(job.monitor, job.event, FireStatus.SKIPPED,
                                    action=job.kind, attempts=0, reason=why)
                return
        self._running[name].add(job.event.id)
        self.d.spawn(self._run(job), f"{job.kind}:{name}:{job.event.id}")

    async def close(self) -> None:
        """Mark every queued run ``interrupted`` (the dispatcher is closing)."""
        for name, queue in list(self._queued.items()):
            while queue:
                job = queue.popleft()
                await self.d.finish(job.monitor, job.event, FireStatus.INTERRUPTED,
                                    reason="daemon stopped before the queued run started")
            self._queued.pop(name, None)

    def _start_next(self, name: str) -> None:
        queue = self._queued.get(name)
        if self.d.closed or not queue or self._running.get(name):
            return
        job = queue.popleft()
        self._running[name].add(job.event.id)
        self.d.spawn(self._run(job), f"{job.kind}:{name}:{job.event.id}")

    def _child_env(self, job: Job, fdir: Path) -> dict[str, str]:
        env = dict(self.d.environ)
        env.update({
            "MONITORS_MONITOR": str(job.monitor.name),
            "MONITORS_EVENT_ID": job.event.id,
            "MONITORS_FIRED_AT": job.event.fired_at,
            "MONITORS_FIRE_DIR": str(fdir),
            "MONITORS_PROMPT_FILE": str(fdir / PROMPT_FILE),
        })
        for key, value in job.spec.env.items():
            env[key] = options.expand(value, environ=self.d.environ, redactor=self.d.redactor)
        return env

    def _cwd(self, given: str | None) -> str:
        """A run's working directory: ``given`` with ``~`` expanded, relative to the
        repository root; the root itself when not given (README: Actions)."""
        root = self.d.root
        path = Path(given).expanduser() if given else root
        return str(path if path.is_absolute() else root / path)

    async def _run(self, job: Job) -> None:
        d = self.d
        name, event = job.monitor.name, job.event
        try:
            fdir = fire_dir(d.store, name, event.id)
            cwd = self._cwd(job.spec.cwd)
            try:
                env = self._child_env(job, fdir)
                if not os.path.isdir(cwd):
                    raise errors.ActionError(f"cwd {cwd} is not a directory")
            except errors.MonitorsError as e:
                await d.finish(job.monitor, event, FireStatus.FAILED, action=job.kind,
                               attempts=0, reason=str(e))
                return
            argv = agents.substitute(job.spec.argv, job.prompt)
            timeout = job.spec.timeout or options.DEFAULT_RUN_TIMEOUT  # seconds
            await asyncio.to_thread(d.store.write_fire_file, name, event.id, PROMPT_FILE,
                                    job.prompt.encode("utf-8"), durable=False)
            # Durable "dispatched" before the spawn: a crash after this point can never
            # lead to a second spawn (at-most-once; recovery marks it interrupted).
            await d.update(name, event.id, status=str(FireStatus.DISPATCHED), action=job.kind,
                           attempts=1, dispatchedAt=timestamps.utc_micro(), command=job.spec.name,
                           argv0=argv[0], output=OUTPUT_FILE)
            outcome = await spawn.execute(
                argv, cwd=cwd, env=env, timeout=timeout,
                write_output=functools.partial(d.store.write_fire_file, name, event.id,
                                               OUTPUT_FILE, durable=True),
                redactor=d.redactor,
                max_bytes=d.max_output, kill_grace=d.kill_grace,
            )
            if outcome.error:
                reason = outcome.error
            elif outcome.timed_out:
                reason = f"timed out after {timeout:g}s; process group killed"
            elif outcome.exit_code != 0:
                reason = f"exit code {outcome.exit_code}"
            else:
                reason = ""
            await d.finish(
                job.monitor, event, FireStatus.SUCCEEDED if outcome.ok else FireStatus.FAILED,
                exitCode=outcome.exit_code, durationSeconds=round(outcome.duration, 3),
                outputBytes=outcome.output_bytes, outputTruncated=outcome.truncated,
                reason=reason,
            )
        except asyncio.CancelledError:
            await d.update(name, event.id, status=str(FireStatus.INTERRUPTED),
                           finishedAt=timestamps.utc_micro(),
                           reason="daemon stopped while running: process group killed")
            raise
        except Exception as e:
            LOG.exception("run of %s/%s failed", name, event.id)
            await d.finish(job.monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")
        finally:
            self._running[name].discard(event.id)
            if not self._running[name]:
                del self._running[name]
            self._start_next(name)
