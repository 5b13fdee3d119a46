"""The real ``events.Dispatcher``: carry out a monitor's action and keep its fire record.

The evaluator has made the new state and a ``pending`` fire record durable
before it calls ``dispatch``. ``dispatch`` renders the templates and resolves
the action at once (a render error or an unknown agent, routine or channel is
a ``failed`` record, never an exception), then detaches the slow part as an
asyncio task it tracks, and returns. Every task ends its record in a terminal
status (``succeeded``, ``failed``, ``skipped``, ``interrupted``), whatever
happens inside it; the one exception is a notify or webhook-out delivery cut
short by ``close``: it stays ``dispatched`` on purpose, and ``recovery`` re-sends
it with the same event id at the next start (at-least-once).

Record updates are durable (fsynced) and run in a worker thread so the event
loop never waits on the disk. ``drain`` waits for in-flight work (``run --once``
and shutdown); ``close`` cancels what is left: running processes' groups are
killed and their fires marked ``interrupted``.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from reconciler import errors
from reconciler.actions import agents, notify, options, routine, run, templating, webhook_out
from reconciler.actions.options import ActionsConfig, CommandSpec, Redactor
from reconciler.actions.records import (
    OUTPUT_FILE,
    PROMPT_FILE,
    FireStatus,
    FireStore,
    fire_dir,
    now_iso,
)
from reconciler.events import Event
from reconciler.model import ActionType, Monitor

LOG = logging.getLogger("monitors.actions")
MAX_QUEUE = 100  # queued runs per monitor (overlap: queue); further fires are skipped


async def _render(text: str, ctx: dict[str, Any]) -> str:
    """``templating.render`` in a worker thread: even a template that spends its whole
    budget (``templating.RENDER_SECONDS``) never holds the event loop up."""
    return await asyncio.to_thread(templating.render, text, ctx)


class FireGuard(Protocol):
    """What the dispatcher tells the guard (``guards.Guards``) when a fire ends."""

    async def after_fire(self, monitor: Monitor, *, ok: bool, reason: str) -> None:
        """A fire of ``monitor`` ended ``succeeded`` (ok) or ``failed``."""
        ...


@dataclass(frozen=True, slots=True)
class _Job:
    monitor: Monitor
    event: Event
    kind: str
    spec: CommandSpec
    prompt: str


class Dispatcher:
    """Dispatches fires; one per daemon (implements ``events.Dispatcher``).

    Args:
        store: the state store (``state.store.Store``; see ``records.FireStore``).
        config: the ``monitors.toml`` action sections (``options.parse``).
        state_dir: the state directory (``notifications.log`` lives there).
        root: the repository root: a run's or routine's default ``cwd``, and the base
            of a relative one (as for sources); default: this process's directory.
        environ: the environment for ``${ENV}``, ``secretEnv`` and spawned
            processes (default ``os.environ``).
        guard: told when each fire ends (drought of failed fires); see ``attach_guard``.
        redactor: the daemon's shared redactor (``reconciler.redaction``); a new one if
            None. Rendered prompts and messages, reasons and output are redacted with it.
        backoff_base, backoff_cap: seconds; retry waits of notify and webhook-out.
        kill_grace: seconds between SIGTERM and SIGKILL of a timed-out run.
        max_output: bytes of a run's output kept in ``output.log``.
    """

    def __init__(
        self,
        store: FireStore,
        config: ActionsConfig,
        *,
        state_dir: Path,
        root: Path | None = None,
        environ: Mapping[str, str] | None = None,
        guard: FireGuard | None = None,
        redactor: Redactor | None = None,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        kill_grace: float = run.KILL_GRACE,
        max_output: int = run.DEFAULT_MAX_OUTPUT,
    ) -> None:
        self.store = store
        self.config = config
        self.state_dir = state_dir
        self.root = root if root is not None else Path.cwd()
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.guard = guard
        self.redactor = redactor if redactor is not None else Redactor()
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.kill_grace = kill_grace
        self.max_output = max_output
        self.notifier = notify.Notifier(
            config, append_log=store.append_notification, environ=self.environ,
            redactor=self.redactor,
            backoff_base=backoff_base, backoff_cap=backoff_cap,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running: dict[str, set[str]] = collections.defaultdict(set)
        self._queued: dict[str, collections.deque[_Job]] = collections.defaultdict(
            collections.deque
        )
        self._client: httpx.AsyncClient | None = None
        self._closed = False

    # -- the Dispatcher protocol -------------------------------------------------

    def reconfigure(self, config: ActionsConfig) -> None:
        """Use ``config`` (``options.parse`` of a re-read monitors.toml, on SIGHUP) for
        fires dispatched from now on; deliveries in flight keep what they resolved."""
        self.config = config
        self.notifier.config = config

    def attach_guard(self, guard: FireGuard) -> None:
        """Set the guard told about each fire's end (``guards.build`` does this)."""
        self.guard = guard

    async def dispatch(self, monitor: Monitor, event: Event) -> None:
        """Carry out ``monitor.action`` for ``event`` (pending record already durable).

        Returns promptly; never raises (failures are in the fire record).
        """
        try:
            await self._dispatch(monitor, event, recovered=False)
        except Exception as e:  # a bug here must not kill the evaluator
            LOG.exception("dispatch of %s/%s failed", monitor.name, event.id)
            await self._finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")

    async def redeliver(self, monitor: Monitor, event: Event) -> None:
        """Re-send a notify or webhook-out fire found unfinished after a crash (same id)."""
        try:
            await self._dispatch(monitor, event, recovered=True)
        except Exception as e:
            LOG.exception("re-send of %s/%s failed", monitor.name, event.id)
            await self._finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")

    def notify_owner(self, monitor: str, message: str) -> asyncio.Task[notify.Delivery]:
        """Send ``message`` about ``monitor`` to the owner's default channels, detached.

        Must be called from the event loop. A failed delivery is logged (WARNING).
        """

        async def send() -> notify.Delivery:
            delivery = await self.notifier.send(
                self.config.owner_channels, monitor=monitor, message=message
            )
            if not delivery.ok:
                LOG.warning("owner notification about %s failed: %s", monitor,
                            self.redactor.redact(delivery.reason))
            return delivery

        return self._spawn(send(), f"owner-notify:{monitor}")

    @property
    def in_flight(self) -> int:
        """Tracked tasks not yet finished."""
        return sum(1 for t in self._tasks if not t.done())

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until no dispatch is in flight (queued runs included), at most ``timeout``
        seconds. Return True when everything finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pending = [t for t in self._tasks if not t.done()]
            if not pending:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            await asyncio.wait(pending, timeout=left)

    async def close(self) -> None:
        """Stop: cancel in-flight work (killing run process groups), mark queued runs
        ``interrupted``, close the HTTP client. Idempotent."""
        self._closed = True
        for name, queue in list(self._queued.items()):
            while queue:
                job = queue.popleft()
                await self._finish(job.monitor, job.event, FireStatus.INTERRUPTED,
                                   reason="daemon stopped before the queued run started")
            self._queued.pop(name, None)
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self.notifier.close()

    # -- internals ---------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _update(self, name: str, event_id: str, **fields: Any) -> None:
        if isinstance(fields.get("reason"), str):
            fields["reason"] = self.redactor.redact(fields["reason"])
        try:
            await asyncio.to_thread(self._write_record, name, event_id, fields)
        except OSError as e:  # disk full, read-only: one line, no traceback
            LOG.warning("cannot update fire record %s/%s: %s", name, event_id,
                        e.strerror or e)
        except Exception:
            LOG.exception("cannot update fire record %s/%s", name, event_id)

    def _write_record(self, name: str, event_id: str, fields: dict[str, Any]) -> None:
        reason = fields.get("reason")
        if reason:
            current = self.store.read_fire(name, event_id) or {}
            reasons = current.get("reasons")
            fields["reasons"] = [*(reasons if isinstance(reasons, list) else []), reason]
        self.store.update_fire(name, event_id, **fields)

    async def _finish(
        self, monitor: Monitor, event: Event, status: FireStatus, **fields: Any
    ) -> None:
        await self._update(monitor.name, event.id, status=str(status), finishedAt=now_iso(),
                           **fields)
        reason = str(fields.get("reason", ""))
        if status is FireStatus.FAILED:
            LOG.warning("fire %s/%s failed: %s", monitor.name, event.id,
                        self.redactor.redact(reason))
        if self.guard is not None and status in (FireStatus.SUCCEEDED, FireStatus.FAILED):
            try:
                await self.guard.after_fire(monitor, ok=status is FireStatus.SUCCEEDED,
                                            reason=self.redactor.redact(reason))
            except Exception:
                LOG.exception("guard after_fire for %s failed", monitor.name)

    async def _dispatch(self, monitor: Monitor, event: Event, *, recovered: bool) -> None:
        action = monitor.action
        kind = str(action.get("type"))
        extra: dict[str, Any] = {"recovered": True} if recovered else {}
        if self._closed:
            LOG.warning("dispatch of %s/%s after close: left pending for recovery",
                        monitor.name, event.id)
            return
        ctx = templating.context(monitor, event)
        try:
            if kind in (ActionType.RUN, ActionType.ROUTINE):
                if kind == ActionType.RUN:
                    spec = agents.for_run(action, self.config)
                    prompt = await _render(str(action.get("prompt", "")), ctx)
                else:
                    spec = routine.resolve(action, self.config)
                    prompt = await _render(routine.prompt(action), ctx)
                await self._admit(_Job(monitor, event, kind, spec, self.redactor.redact(prompt)))
            elif kind == ActionType.NOTIFY:
                channels = self.notifier.channels_for(action.get("channel"))
                message = self.redactor.redact(await _render(
                    str(action.get("message") or "{{ monitor.name }}: {{ event }}"), ctx))
                self._spawn(self._notify(monitor, event, channels, message, extra),
                            f"notify:{monitor.name}:{event.id}")
            elif kind == ActionType.WEBHOOK_OUT:
                sent = await self._body_sent(monitor.name, event.id) if recovered else None
                request = self._webhook_request(monitor, event, body=sent)
                self._spawn(self._webhook(monitor, event, request, extra),
                            f"webhook-out:{monitor.name}:{event.id}")
            else:
                raise errors.ActionError(f"unknown action type {kind!r}")
        except errors.MonitorsError as e:
            await self._finish(monitor, event, FireStatus.FAILED, action=kind, attempts=0,
                               reason=str(e), **extra)

    # run and routine

    async def _admit(self, job: _Job) -> None:
        """Start, queue or skip a run. Record writes of one fire never overlap: a queued
        fire's record is written before the fire can be started."""
        name = job.monitor.name
        running = self._running.get(name)
        if running and job.spec.overlap != "parallel":
            behind = sorted(running)[-1]
            if job.spec.overlap == "queue" and len(self._queued[name]) < MAX_QUEUE:
                await self._update(name, job.event.id, action=job.kind, queuedBehind=behind,
                                   reason=f"queued (overlap: queue) behind {behind}")
                if self._running.get(name) or self._queued[name]:
                    self._queued[name].append(job)
                    self._start_next(name)  # no-op while a run is going
                    return
                # the previous run ended while the record was written: start now
            else:
                why = ("queue full" if job.spec.overlap == "queue"
                       else f"overlap: skip: run {behind} still running")
                await self._finish(job.monitor, job.event, FireStatus.SKIPPED, action=job.kind,
                                   attempts=0, reason=why)
                return
        self._running[name].add(job.event.id)
        self._spawn(self._run_job(job), f"{job.kind}:{name}:{job.event.id}")

    def _start_next(self, name: str) -> None:
        queue = self._queued.get(name)
        if self._closed or not queue or self._running.get(name):
            return
        job = queue.popleft()
        self._running[name].add(job.event.id)
        self._spawn(self._run_job(job), f"{job.kind}:{name}:{job.event.id}")

    def _child_env(self, job: _Job, fdir: Path) -> dict[str, str]:
        env = dict(self.environ)
        env.update({
            "MONITORS_MONITOR": str(job.monitor.name),
            "MONITORS_EVENT_ID": job.event.id,
            "MONITORS_FIRED_AT": job.event.fired_at,
            "MONITORS_FIRE_DIR": str(fdir),
            "MONITORS_PROMPT_FILE": str(fdir / PROMPT_FILE),
        })
        for key, value in job.spec.env.items():
            env[key] = options.expand(value, environ=self.environ, redactor=self.redactor)
        return env

    def _cwd(self, given: str | None) -> str:
        """A run's working directory: ``given`` with ``~`` expanded, relative to the
        repository root; the root itself when not given (README: Actions)."""
        path = Path(given).expanduser() if given else self.root
        return str(path if path.is_absolute() else self.root / path)

    async def _run_job(self, job: _Job) -> None:
        name, event = job.monitor.name, job.event
        try:
            fdir = fire_dir(self.store, name, event.id)
            cwd = self._cwd(job.spec.cwd)
            try:
                env = self._child_env(job, fdir)
                if not os.path.isdir(cwd):
                    raise errors.ActionError(f"cwd {cwd} is not a directory")
            except errors.MonitorsError as e:
                await self._finish(job.monitor, event, FireStatus.FAILED, action=job.kind,
                                   attempts=0, reason=str(e))
                return
            argv = agents.substitute(job.spec.argv, job.prompt)
            timeout = job.spec.timeout or options.DEFAULT_RUN_TIMEOUT  # seconds
            await asyncio.to_thread(self.store.write_fire_file, name, event.id, PROMPT_FILE,
                                    job.prompt.encode("utf-8"), durable=False)
            # Durable "dispatched" before the spawn: a crash after this point can never
            # lead to a second spawn (at-most-once; recovery marks it interrupted).
            await self._update(name, event.id, status=str(FireStatus.DISPATCHED), action=job.kind,
                               attempts=1, dispatchedAt=now_iso(), command=job.spec.name,
                               argv0=argv[0], output=OUTPUT_FILE)
            outcome = await run.execute(
                argv, cwd=cwd, env=env, timeout=timeout,
                write_output=functools.partial(self.store.write_fire_file, name, event.id,
                                               OUTPUT_FILE, durable=True),
                redactor=self.redactor,
                max_bytes=self.max_output, kill_grace=self.kill_grace,
            )
            if outcome.error:
                reason = outcome.error
            elif outcome.timed_out:
                reason = f"timed out after {timeout:g}s; process group killed"
            elif outcome.exit_code != 0:
                reason = f"exit code {outcome.exit_code}"
            else:
                reason = ""
            await self._finish(
                job.monitor, event, FireStatus.SUCCEEDED if outcome.ok else FireStatus.FAILED,
                exitCode=outcome.exit_code, durationSeconds=round(outcome.duration, 3),
                outputBytes=outcome.output_bytes, outputTruncated=outcome.truncated,
                reason=reason,
            )
        except asyncio.CancelledError:
            await self._update(name, event.id, status=str(FireStatus.INTERRUPTED),
                               finishedAt=now_iso(),
                               reason="daemon stopped while running: process group killed")
            raise
        except Exception as e:
            LOG.exception("run of %s/%s failed", name, event.id)
            await self._finish(job.monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")
        finally:
            self._running[name].discard(event.id)
            if not self._running[name]:
                del self._running[name]
            self._start_next(name)

    # notify

    async def _notify(self, monitor: Monitor, event: Event, channels: tuple[str, ...],
                      message: str, extra: dict[str, Any]) -> None:
        async def deliver() -> None:
            await self._update(monitor.name, event.id, status=str(FireStatus.DISPATCHED),
                               action=str(ActionType.NOTIFY), dispatchedAt=now_iso(),
                               channels=list(channels), **extra)
            delivery = await self.notifier.send(channels, monitor=monitor.name, message=message,
                                                event_id=event.id)
            await self._finish(monitor, event,
                               FireStatus.SUCCEEDED if delivery.ok else FireStatus.FAILED,
                               attempts=delivery.attempts, reason=delivery.reason)

        await self._delivery("notify", monitor, event, deliver())

    async def _delivery(self, what: str, monitor: Monitor, event: Event,
                        body: Coroutine[Any, Any, None]) -> None:
        """Await a notify or webhook-out delivery (``body``). Cut short by ``close``, the
        record stays ``dispatched`` (re-sent by ``recovery``); a bug fails the fire."""
        try:
            await body
        except asyncio.CancelledError:
            await self._update(monitor.name, event.id,
                               reason="interrupted by shutdown; re-sent at the next start")
            raise
        except Exception as e:
            LOG.exception("%s of %s/%s failed", what, monitor.name, event.id)
            await self._finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")

    # webhook-out

    def _webhook_request(self, monitor: Monitor, event: Event, *, body: bytes | None = None,
                         ) -> tuple[str, bytes, dict[str, str]]:
        """URL, body and headers of a webhook-out; ``body``: the bytes a first attempt
        sent (a re-send after a crash repeats them, so its signature is the same)."""
        action = monitor.action
        url = options.expand(str(action["url"]), environ=self.environ, redactor=self.redactor)
        extra = {str(k): options.expand(str(v), environ=self.environ, redactor=self.redactor)
                 for k, v in dict(action.get("headers") or {}).items()}
        secret_env = action.get("secretEnv")
        secret = self.environ.get(str(secret_env)) if secret_env else None
        if secret:
            self.redactor.add(secret)
        elif secret_env:
            LOG.warning("%s: secretEnv %s is not set: webhook-out sent unsigned",
                        monitor.name, secret_env)
        data = body if body is not None else webhook_out.body(monitor, event)
        return url, data, webhook_out.headers(event, data, secret=secret, extra=extra)

    async def _webhook(self, monitor: Monitor, event: Event,
                       request: tuple[str, bytes, dict[str, str]], extra: dict[str, Any]) -> None:
        url, data, headers = request
        action = monitor.action

        async def deliver() -> None:
            # the body as sent (the record's JSON would not keep its key order), so a
            # re-send after a crash repeats the very bytes and signature of this one
            await self._update(monitor.name, event.id, status=str(FireStatus.DISPATCHED),
                               action=str(ActionType.WEBHOOK_OUT), dispatchedAt=now_iso(),
                               signed=webhook_out.SIGNATURE_HEADER in headers,
                               body=data.decode("utf-8"), **extra)
            if self._client is None:
                self._client = httpx.AsyncClient(follow_redirects=False)
            # A re-send after a crash goes on counting: the record holds the attempts
            # started before (each is recorded before its request is made).
            before = (await self._attempts_made(monitor.name, event.id)
                      if extra.get("recovered") else 0)

            async def started(attempt: int) -> None:
                await self._update(monitor.name, event.id, attempts=attempt)

            delivery = await webhook_out.post(
                self._client, url, data, headers,
                timeout=float(action.get("timeout") or 10.0),
                max_attempts=int(action.get("maxAttempts") or 5),
                max_time=float(action.get("maxTime") or 120.0),
                backoff_base=self.backoff_base, backoff_cap=self.backoff_cap,
                on_attempt=started, done_before=before,
            )
            await self._finish(monitor, event,
                               FireStatus.SUCCEEDED if delivery.ok else FireStatus.FAILED,
                               attempts=delivery.attempts, httpStatus=delivery.status,
                               reason=delivery.reason)

        await self._delivery("webhook-out", monitor, event, deliver())

    async def _body_sent(self, name: str, event_id: str) -> bytes | None:
        """The ``body`` a webhook-out fire record keeps from its first attempt (UTF-8), or
        None when there is none (the crash came before it was dispatched)."""
        try:
            record = await asyncio.to_thread(self.store.read_fire, name, event_id) or {}
        except Exception:  # rebuilding the body only loses byte-identity: say why, go on
            LOG.warning("cannot read fire record %s/%s: re-sent body rebuilt from the event",
                        name, event_id, exc_info=True)
            return None
        body = record.get("body")
        return body.encode("utf-8") if isinstance(body, str) else None

    async def _attempts_made(self, name: str, event_id: str) -> int:
        """``attempts`` of the fire record (0 when missing or unreadable)."""
        try:
            record = await asyncio.to_thread(self.store.read_fire, name, event_id) or {}
        except Exception:  # counting from 0 only re-sends more: say why, go on
            LOG.warning("cannot read fire record %s/%s: re-send counts attempts from 0",
                        name, event_id, exc_info=True)
            return 0
        value = record.get("attempts")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
            else 0


def build(
    store: FireStore, toml: Mapping[str, Any], *, state_dir: Path, **kwargs: Any
) -> Dispatcher:
    """A ``Dispatcher`` for ``Settings.toml`` (``options.parse``); see ``Dispatcher`` for kwargs.

    Raises:
        errors.ConfigError: an action section of monitors.toml is invalid.
    """
    return Dispatcher(store, options.parse(toml), state_dir=state_dir, **kwargs)

