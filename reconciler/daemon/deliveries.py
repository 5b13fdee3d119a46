"""The webhook receiver's core: verify, refuse or spool, then evaluate.

``Receiver.receive`` takes one delivery (provider, headers, raw body; the monitor's
name for the generic route) and returns the ``Answer`` the HTTP route sends
(``server.hooks``):

1. The candidates: every running ``webhook`` monitor of that provider (the generic
   route: the named monitor only, 404 when it is not a running generic webhook).
2. The signature (``sources.webhook.signature_ok``, constant time) under each
   candidate's secret (``secretEnv``, from the environment, registered with the
   redactor). No secret set at all: 401 ``unknown secret``; no header: 401; no secret
   matching: 401. A monitor only ever sees deliveries signed with its own secret.
3. Linear: ``webhookTimestamp`` within 60 s of the (injectable) clock, else 401.
4. The replay window (``state.deliveries``): a delivery id seen before is 200 with
   ``duplicate`` and no second event.
5. The delivery is spooled durably (fsync) *before* the answer: a crash after the 2xx
   loses nothing (``drain`` evaluates the spool when the server starts again).
6. The answer (200 ``accepted``); then, in a task, every matching monitor (``events``,
   with ``EVENT.ACTION`` filters) evaluates it through ``Engine.push`` (``select``
   applied), one delivery at a time in arrival order, and the spool file is removed.

A GitHub ``push`` for the repository git mode follows also fetches and reconciles at
once (``daemon.gitmode.Tracker.follows``). Each refusal is counted
(``metrics.delivery``) and logged once, without the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.daemon import metrics
from reconciler.model import Monitor, Observation
from reconciler.sources import webhook
from reconciler.state.deliveries import DeliveryLog, Spooled

if TYPE_CHECKING:
    from reconciler.daemon.main import Daemon

log = logging.getLogger("monitors.hooks")

MAX_BODY = 25 * 1024 * 1024
"""Bytes a delivery may have (GitHub caps payloads at 25 MB); larger is 413."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the route answers: ``status`` and a JSON mapping (``error`` when refused)."""

    status: int
    body: Mapping[str, Any] = field(default_factory=dict)


class Receiver:
    """Receives deliveries for ``daemon`` (module docstring).

    Args:
        daemon: the running daemon (its engine, reconciler, redactor, state directory).
        clock: Unix seconds now (Linear's timestamp check, the replay window).
        environ: where ``secretEnv`` is read.
    """

    def __init__(self, daemon: Daemon, *, clock: Callable[[], float] = time.time,
                 environ: Mapping[str, str] = os.environ) -> None:
        self.daemon = daemon
        self.clock = clock
        self.environ = environ
        self.log = DeliveryLog(daemon.cfg.state_dir, clock=clock)
        self._queue: asyncio.Queue[tuple[Spooled, bool]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def _webhooks(self, provider: str) -> list[Monitor]:
        parts = self.daemon.parts
        running = parts.engine.running() if parts is not None else {}
        return [m for m in running.values() if isinstance(m.source, webhook.WebhookSpec)
                and m.source.provider == provider]

    def _refuse(self, provider: str, status: int, outcome: str, why: str,
                delivery: str | None) -> Answer:
        metrics.delivery(provider, outcome)
        log.warning("webhook %s refused (%d %s): %s%s", provider, status, outcome, why,
                    f" (delivery {delivery})" if delivery else "")
        return Answer(status, {"error": why})

    def _secret(self, monitor: Monitor) -> str:
        assert isinstance(monitor.source, webhook.WebhookSpec)
        secret = self.environ.get(monitor.source.secret_name, "")
        if secret:
            self.daemon.redactor.add(secret)
        return secret

    async def receive(self, provider: str, headers: Mapping[str, str], body: bytes, *,
                      monitor: str | None = None) -> Answer:
        """Verify, refuse or spool one delivery (module docstring) and answer.

        Raises:
            errors.StateError: never; a spool that cannot be written is a 503 answer
                (the provider retries), never a lost delivery.
        """
        delivery = headers.get(webhook.DELIVERY_HEADER[provider]) or None
        refused, keyed, keys, git_secret = self._admit(provider, headers, monitor)
        if refused is not None:
            return refused
        header = headers.get(webhook.SIGNED_BY[provider])
        good = {s for s in keys if webhook.signature_ok(provider, s, body, header)}
        if not good:
            return self._refuse(provider, 401, "bad-signature",
                                "signature does not match the body", delivery)
        payload = webhook.parse(body)
        if provider == "linear" and not webhook.linear_fresh(payload, self.clock()):
            return self._refuse(provider, 401, "stale",
                                "webhookTimestamp missing or more than 60s from now", delivery)
        if await asyncio.to_thread(self.log.seen, provider, delivery):
            metrics.delivery(provider, "replayed")
            log.info("webhook %s: delivery %s seen before: ignored", provider, delivery)
            return Answer(200, {"duplicate": True, "monitors": []})
        event, action = webhook.event_of(provider, headers, payload)
        names = tuple(m.name for m, s in keyed if s in good and isinstance(
            m.source, webhook.WebhookSpec) and webhook.matches(m.source, event, action))
        spooled = Spooled(provider=provider, event=event, action=action, delivery=delivery,
                          monitors=names, received_at=self.clock(), body=body)
        try:
            spooled = await asyncio.to_thread(self.log.spool, spooled)
        except OSError as e:
            return self._refuse(provider, 503, "unwritable",
                                f"cannot spool the delivery: {e.strerror or e}", delivery)
        metrics.delivery(provider, "accepted")
        self._enqueue(spooled)
        if git_secret in good and event == "push" and isinstance(payload, dict):
            self._git_push(payload)
        return Answer(200, {"accepted": True, "event": event, "monitors": list(names)})

    def precheck(self, provider: str, headers: Mapping[str, str], *,
                 monitor: str | None = None) -> Answer | None:
        """The refusal that needs no body (an unknown generic monitor 404, no secret
        set or no signature header 401), or None: the route answers it before reading
        up to ``MAX_BODY`` bytes from a sender that cannot be accepted. Logged and
        counted as ``receive`` does (``receive`` checks the same again)."""
        return self._admit(provider, headers, monitor)[0]

    def _admit(self, provider: str, headers: Mapping[str, str], monitor: str | None
               ) -> tuple[Answer | None, list[tuple[Monitor, str]], set[str], str]:
        """``(refusal or None, [(candidate, its secret)], the secrets, git mode's)``."""
        delivery = headers.get(webhook.DELIVERY_HEADER[provider]) or None
        if delivery is not None and len(delivery) > webhook.MAX_DELIVERY_ID:
            return (self._refuse(provider, 400, "bad-delivery-id",
                                 f"{webhook.DELIVERY_HEADER[provider]} longer than "
                                 f"{webhook.MAX_DELIVERY_ID} characters", None), [], set(), "")
        candidates = self._webhooks(provider)
        if monitor is not None:
            candidates = [m for m in candidates if m.name == monitor]
            if not candidates:
                return (self._refuse(provider, 404, "unknown-monitor",
                                     f"no running generic webhook monitor {monitor!r}",
                                     delivery), [], set(), "")
        header = headers.get(webhook.SIGNED_BY[provider])
        keyed = [(m, self._secret(m)) for m in candidates]
        keys = {s for _, s in keyed if s}
        git_secret = self.environ.get(webhook.DEFAULT_SECRET_ENV["github"], "") \
            if provider == "github" and self._git_hook() else ""
        if git_secret:
            self.daemon.redactor.add(git_secret)
            keys.add(git_secret)
        if not keys:
            return (self._refuse(provider, 401, "unknown-secret",
                                 "no signing secret is set for this provider (secretEnv)",
                                 delivery), keyed, keys, git_secret)
        if not header:
            return (self._refuse(provider, 401, "unsigned",
                                 f"missing {webhook.SIGNED_BY[provider]} header", delivery),
                    keyed, keys, git_secret)
        return None, keyed, keys, git_secret

    def _git_hook(self) -> bool:
        return getattr(self.daemon.reconciler, "git", None) is not None

    def _git_push(self, payload: Mapping[str, Any]) -> None:
        """Fetch and reconcile now when ``payload`` is a push to the followed repository."""
        git = self.daemon.reconciler.git
        repository = payload.get("repository")
        if git is None or not isinstance(repository, dict) or not git.follows(repository):
            return
        log.info("webhook github push to %s: fetching and reconciling",
                 repository.get("full_name"))

        async def run() -> None:
            with contextlib.suppress(Exception):
                await self.daemon.reconciler.reconcile(trigger="webhook push", fetch=True)

        task = asyncio.get_running_loop().create_task(run(), name="monitors:webhook-git-push")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _enqueue(self, spooled: Spooled, *, drained: bool = False) -> None:
        self._queue.put_nowait((spooled, drained))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(
                self._work(), name="monitors:webhook-deliveries")

    async def _work(self) -> None:
        while not self._queue.empty():
            spooled, drained = self._queue.get_nowait()
            try:
                await self.evaluate(spooled, drained=drained)
            except Exception:  # never lose the worker; the spool file stays for a restart
                log.exception("webhook %s: evaluating delivery %s failed", spooled.provider,
                              spooled.delivery)

    async def evaluate(self, spooled: Spooled, *, drained: bool = False) -> None:
        """Evaluate ``spooled`` by each of its monitors still running, then remove it.

        Each observation carries the spool file's name (``meta.receipt``); a delivery
        drained after a restart skips a monitor whose recent fires already hold it
        (the crash came between its fire and the spool file's removal): once, not twice.
        """
        parts = self.daemon.parts
        if parts is None:
            return
        running = parts.engine.running()
        receipt = spooled.path.stem if spooled.path is not None else None
        for name in spooled.monitors:
            monitor = running.get(name)  # type: ignore[call-overload]
            if monitor is None or not isinstance(monitor.source, webhook.WebhookSpec):
                continue
            if drained and receipt and await asyncio.to_thread(
                    _fired_for, parts.store, monitor.name, receipt):
                continue
            item: Any
            try:
                observed = webhook.observation(monitor, spooled.body, event=spooled.event,
                                               action=spooled.action,
                                               delivery=spooled.delivery)
                item = Observation(observed.text, {**observed.meta, "receipt": receipt})
            except errors.SourceError as e:
                item = e
            await parts.engine.push(monitor.name, item)
        await asyncio.to_thread(self.log.done, spooled)

    async def drain(self) -> None:
        """Queue every delivery a previous run spooled but did not finish evaluating."""
        pending = await asyncio.to_thread(self.log.pending)
        if pending:
            log.info("webhook: evaluating %d delivery(ies) received before a restart",
                     len(pending))
        for spooled in pending:
            self._enqueue(spooled, drained=True)

    async def idle(self) -> None:
        """Wait until every queued delivery is evaluated (tests, shutdown)."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)


FIRES_CHECKED = 50
"""Recent fires of a monitor searched for a drained delivery's receipt."""


def _fired_for(store: Any, name: str, receipt: str) -> bool:
    """Whether one of ``name``'s recent fires came from the spool file ``receipt``."""
    for record in store.fires(name, limit=FIRES_CHECKED):
        meta = (record.get("event") or {}).get("meta") or {}
        if meta.get("receipt") == receipt:
            return True
    return False
