"""The real ``events.Dispatcher``: carry out a monitor's action and keep its fire record.

The evaluator has made the new state and a ``pending`` fire record durable
before it calls ``dispatch``. ``dispatch`` looks the action type up in
``actions.registry`` and calls its module's ``fire``, which renders the templates and resolves
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
killed and their fires marked ``interrupted``. The overlap queue of ``run`` and
``routine`` is ``actions.jobs``; the type modules reach the records, tasks and
environment through the public methods below (``spawn``, ``update``, ``finish``,
``delivery``, ``render``, ``read_fire``, ``http_client``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconciler import errors, timestamps
from reconciler.actions import jobs, notifier, options, registry, spawn
from reconciler.actions.options import ActionsConfig, Redactor
from reconciler.actions.records import FireStatus, FireStore
from reconciler.events import Event
from reconciler.model import Monitor

if TYPE_CHECKING:
    import httpx

LOG = logging.getLogger("monitors.actions")


class FireGuard(Protocol):
    """What the dispatcher tells the guard (``guards.Guards``) when a fire ends."""

    async def after_fire(self, monitor: Monitor, *, ok: bool, reason: str) -> None:
        """A fire of ``monitor`` ended ``succeeded`` (ok) or ``failed``."""
        ...


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
        kill_grace: float = spawn.KILL_GRACE,
        max_output: int = spawn.DEFAULT_MAX_OUTPUT,
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
        self.notifier = notifier.Notifier(
            config, append_log=store.append_notification, environ=self.environ,
            redactor=self.redactor,
            backoff_base=backoff_base, backoff_cap=backoff_cap,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self.runs = jobs.Runs(self)
        self._client: httpx.AsyncClient | None = None
        self._closed = False
        self.on_finish: Callable[[Monitor, Event, FireStatus], None] | None = None
        """Told when each fire ends (the daemon's metrics); must not raise or block."""

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
            await self.finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")

    async def redeliver(self, monitor: Monitor, event: Event) -> None:
        """Re-send a notify or webhook-out fire found unfinished after a crash (same id)."""
        try:
            await self._dispatch(monitor, event, recovered=True)
        except Exception as e:
            LOG.exception("re-send of %s/%s failed", monitor.name, event.id)
            await self.finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")

    def notify_owner(self, monitor: str, message: str) -> asyncio.Task[notifier.Delivery]:
        """Send ``message`` about ``monitor`` to the owner's default channels, detached.

        Must be called from the event loop. A failed delivery is logged (WARNING).
        """

        async def send() -> notifier.Delivery:
            delivery = await self.notifier.send(
                self.config.owner_channels, monitor=monitor, message=message
            )
            if not delivery.ok:
                LOG.warning("owner notification about %s failed: %s", monitor,
                            self.redactor.redact(delivery.reason))
            return delivery

        return self.spawn(send(), f"owner-notify:{monitor}")

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
        await self.runs.close()
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

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def update(self, name: str, event_id: str, **fields: Any) -> None:
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

    async def finish(
        self, monitor: Monitor, event: Event, status: FireStatus, **fields: Any
    ) -> None:
        await self.update(monitor.name, event.id, status=str(status),
                          finishedAt=timestamps.utc_micro(), **fields)
        if self.on_finish is not None:
            with contextlib.suppress(Exception):
                self.on_finish(monitor, event, status)
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
        kind = monitor.action.type
        extra: dict[str, Any] = {"recovered": True} if recovered else {}
        if self._closed:
            LOG.warning("dispatch of %s/%s after close: left pending for recovery",
                        monitor.name, event.id)
            return
        try:
            found = registry.TYPES.get(kind)
            if found is None:
                raise errors.ActionError(f"unknown action type {kind!r}")
            await found.fire(self, monitor, event, monitor.action, recovered=recovered)
        except errors.MonitorsError as e:
            await self.finish(monitor, event, FireStatus.FAILED, action=kind, attempts=0,
                              reason=str(e), **extra)

    # -- what the type modules' ``fire`` use -------------------------------------

    @property
    def closed(self) -> bool:
        """``close`` has begun: nothing new starts."""
        return self._closed

    async def render(self, text: str, ctx: dict[str, Any]) -> str:
        """``templating.render`` in a worker thread: even a template that spends its whole
        budget (``templating.RENDER_SECONDS``) never holds the event loop up.

        Raises:
            errors.ActionError: the template does not render.
        """
        from reconciler.actions import templating  # Jinja2: only once a fire renders

        return await asyncio.to_thread(templating.render, text, ctx)

    def http_client(self) -> httpx.AsyncClient:
        """The dispatcher's HTTP client (made on first use, closed by ``close``)."""
        if self._client is None:
            import httpx  # only once an action sends HTTP (a one-shot run may never)

            self._client = httpx.AsyncClient(follow_redirects=False)
        return self._client

    async def read_fire(self, name: str, event_id: str, *, why: str) -> dict[str, Any]:
        """The fire record (empty when missing); unreadable, a warning ending in ``why``
        (what is lost, e.g. ``re-send counts attempts from 0``) and an empty record."""
        try:
            record = await asyncio.to_thread(self.store.read_fire, name, event_id)
            return dict(record) if record else {}
        except Exception:  # a re-send goes on with less: say why
            LOG.warning("cannot read fire record %s/%s: %s", name, event_id, why,
                        exc_info=True)
            return {}

    async def delivery(self, what: str, monitor: Monitor, event: Event,
                       body: Coroutine[Any, Any, None]) -> None:
        """Await a notify or webhook-out delivery (``body``). Cut short by ``close``, the
        record stays ``dispatched`` (re-sent by ``recovery``); a bug fails the fire."""
        try:
            await body
        except asyncio.CancelledError:
            await self.update(monitor.name, event.id,
                              reason="interrupted by shutdown; re-sent at the next start")
            raise
        except Exception as e:
            LOG.exception("%s of %s/%s failed", what, monitor.name, event.id)
            await self.finish(monitor, event, FireStatus.FAILED, reason=f"internal error: {e}")


def build(
    store: FireStore, toml: Mapping[str, Any], *, state_dir: Path, **kwargs: Any
) -> Dispatcher:
    """A ``Dispatcher`` for ``Settings.toml`` (``options.parse``); see ``Dispatcher`` for kwargs.

    Raises:
        errors.ConfigError: an action section of monitors.toml is invalid.
    """
    return Dispatcher(store, options.parse(toml), state_dir=state_dir, **kwargs)

