"""Deliver a message to named channels: the runtime half of the ``notify`` action type.

Also what the guards use to tell the owner (``Dispatcher.notify_owner``).

Channels come from ``[channels.NAME]`` in ``monitors.toml`` and are delivered
through Apprise (any of its URL schemes), called in a child process killed at our
own per-attempt timeout (``apprise_child``); retries (``actions.retry``: the policy
webhook-out uses too, bounded by the channel's ``maxAttempts``), the per-channel rate limit and
durability (the fire record) are ours. The built-in ``log`` channel writes one
line ``NOTIFY <monitor>: <message>`` at INFO to the logger ``monitors.notify``
and appends it, time-stamped, to ``<state>/notifications.log`` (fsynced, through
the store: ``Store.append_notification``); it
needs no network. An unknown or failing channel fails that delivery only.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler import errors
from reconciler.actions import apprise_child, options, retry
from reconciler.actions.options import ActionsConfig, ChannelSpec, Redactor

LOGGER = logging.getLogger("monitors.notify")
MAX_MESSAGE = 16 * 1024  # characters sent per notification
APPRISE_CHILDREN = 4  # Apprise deliveries under way at once (a child process each)


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of delivering one message to one or more channels.

    Attributes:
        ok: every channel accepted it.
        attempts: the most attempts any one channel took.
        failures: ``channel: reason`` for each channel that failed.
    """

    ok: bool
    attempts: int
    failures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reason(self) -> str:
        """The failures joined for the fire record, empty when ok."""
        return "; ".join(self.failures)


def one_line(text: str) -> str:
    """``text`` on one line: CR/LF escaped as ``\\n``, capped at ``MAX_MESSAGE``."""
    text = text[:MAX_MESSAGE]
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


async def _apprise_send(url: str, title: str, body: str, *, timeout: float) -> None:
    # in a child process killed at ``timeout``: an answer that never ends cannot keep a
    # thread of the daemon reading (and the daemon growing) after we stop waiting
    answer = await apprise_child.send_async(url, title, body[:MAX_MESSAGE], timeout=timeout)
    if answer is None:
        raise TimeoutError
    if not answer.added:
        raise errors.ActionError("not a valid Apprise URL (check the scheme)")
    if not answer.ok:
        raise errors.ActionError("Apprise reported the delivery failed")


class Notifier:
    """Delivers messages to channels; one per dispatcher.

    Args:
        config: the parsed ``monitors.toml`` action sections.
        append_log: appends lines to ``<state>/notifications.log``, fsynced
            (``Store.append_notification``); raises ``OSError``.
        environ: environment for ``${ENV}`` in channel URLs.
        redactor: collects the secret values it expands.
        backoff_base, backoff_cap: seconds; the waits between attempts (``retry.Policy``).
    """

    def __init__(
        self,
        config: ActionsConfig,
        *,
        append_log: Callable[[bytes], object],
        environ: Mapping[str, str],
        redactor: Redactor,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
    ) -> None:
        self.config = config
        self._append_log = append_log
        self._environ = environ
        self._redactor = redactor
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._rate_locks: dict[str, asyncio.Lock] = {}
        self._sent: dict[str, collections.deque[float]] = {}
        self._apprise_slots = asyncio.Semaphore(APPRISE_CHILDREN)

    def close(self) -> None:
        """Nothing to stop: each Apprise child ends at its deadline or when its
        delivery is cancelled (``apprise_child.send_async``)."""

    def channels_for(self, channel: str | None) -> tuple[str, ...]:
        """The channels a ``notify`` action with ``channel`` goes to (owner's default if None)."""
        return (channel,) if channel else self.config.owner_channels

    async def send(
        self, channels: Sequence[str], *, monitor: str, message: str, event_id: str = ""
    ) -> Delivery:
        """Deliver ``message`` about ``monitor`` to each of ``channels``; never raises
        for a channel problem (it is in the returned ``Delivery``)."""
        results = await asyncio.gather(
            *(self._send_one(c, monitor=monitor, message=message, event_id=event_id)
              for c in channels)
        )
        failures = tuple(f"{c}: {reason}" for c, (_, reason) in zip(channels, results, strict=True)
                         if reason)
        attempts = max((n for n, _ in results), default=0)
        return Delivery(ok=not failures, attempts=attempts, failures=failures)

    async def _send_one(
        self, name: str, *, monitor: str, message: str, event_id: str
    ) -> tuple[int, str]:
        spec = self.config.channels.get(name)
        if spec is None:
            known = ", ".join(sorted(self.config.channels))
            return 0, f"unknown channel (known: {known}; see [channels])"
        if spec.url is None:
            try:
                await asyncio.to_thread(self._write_log, monitor, message, event_id)
            except OSError as e:
                return 1, f"cannot append to {e.filename}: {e.strerror}"
            return 1, ""
        try:
            url = options.expand(spec.url, environ=self._environ, redactor=self._redactor)
        except errors.ActionError as e:
            return 0, str(e)
        await self._wait_rate(spec)
        policy = retry.Policy(max_attempts=spec.max_attempts, base=self._backoff_base,
                              cap=self._backoff_cap)
        reason = ""
        for attempt in range(1, policy.max_attempts + 1):
            try:
                async with self._apprise_slots:
                    await _apprise_send(url, f"monitors: {monitor}", message,
                                        timeout=spec.timeout)
                return attempt, ""
            except TimeoutError:
                reason = f"no answer within {spec.timeout:g}s"
            except errors.ActionError as e:
                reason = str(e)
                if "valid Apprise URL" in reason:
                    return attempt, reason
            except Exception as e:  # a plugin bug must fail this delivery, not the daemon
                reason = f"{type(e).__name__}: {self._redactor.redact(str(e))}"
            if attempt < policy.max_attempts:
                await asyncio.sleep(policy.delay(attempt))
        return policy.max_attempts, f"failed after {policy.max_attempts} attempt(s): {reason}"

    async def _wait_rate(self, spec: ChannelSpec) -> None:
        """Hold a delivery until ``spec.rate_limit`` allows it (waits at most ``per``)."""
        limit = spec.rate_limit
        if limit is None:
            return
        lock = self._rate_locks.setdefault(spec.name, asyncio.Lock())
        async with lock:
            sent = self._sent.setdefault(spec.name, collections.deque())
            now = time.monotonic()
            while sent and sent[0] <= now - limit.per:
                sent.popleft()
            if len(sent) >= limit.max:
                await asyncio.sleep(max(0.0, sent[0] + limit.per - now))
                sent.popleft()
            sent.append(time.monotonic())

    def _write_log(self, monitor: str, message: str, event_id: str) -> None:
        line = f"NOTIFY {monitor}: {one_line(message)}"
        LOGGER.info("%s", line)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        suffix = f" [{event_id}]" if event_id else ""
        data = f"{stamp} {line}{suffix}\n".encode()
        self._append_log(data)
