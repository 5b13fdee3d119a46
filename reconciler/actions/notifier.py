"""Deliver a message to named channels: the runtime half of the ``notify`` action type.

Also what the guards use to tell the owner (``Dispatcher.notify_owner``).

Channels come from ``[channels.NAME]`` in ``monitors.toml`` and are delivered
through Apprise (any of its URL schemes), called in a worker thread under our
own per-attempt timeout; retries (``actions.retry``: the policy webhook-out
uses too, bounded by the channel's ``maxAttempts``), the per-channel rate limit and
durability (the fire record) are ours. The built-in ``log`` channel writes one
line ``NOTIFY <monitor>: <message>`` at INFO to the logger ``monitors.notify``
and appends it, time-stamped, to ``<state>/notifications.log`` (fsynced); it
needs no network. An unknown or failing channel fails that delivery only.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reconciler import errors
from reconciler.actions import options, retry
from reconciler.actions.options import ActionsConfig, ChannelSpec, Redactor
from reconciler.state import atomic

LOGGER = logging.getLogger("monitors.notify")
NOTIFICATIONS_FILE = "notifications.log"
MAX_MESSAGE = 16 * 1024  # characters sent per notification
APPRISE_THREADS = 4  # worker threads for Apprise deliveries


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


def _apprise_send(url: str, title: str, body: str) -> None:
    import apprise  # imported lazily: it is slow to import and only needed here

    sender = apprise.Apprise()
    if not sender.add(url):
        raise errors.ActionError("not a valid Apprise URL (check the scheme)")
    if not sender.notify(body=body[:MAX_MESSAGE], title=title):
        raise errors.ActionError("Apprise reported the delivery failed")


class Notifier:
    """Delivers messages to channels; one per dispatcher.

    Args:
        config: the parsed ``monitors.toml`` action sections.
        state_dir: where ``notifications.log`` lives.
        environ: environment for ``${ENV}`` in channel URLs.
        redactor: collects the secret values it expands.
        backoff_base, backoff_cap: seconds; the waits between attempts (``retry.Policy``).
    """

    def __init__(
        self,
        config: ActionsConfig,
        *,
        state_dir: Path,
        environ: Mapping[str, str],
        redactor: Redactor,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
    ) -> None:
        self.config = config
        self.log_path = state_dir / NOTIFICATIONS_FILE
        self._environ = environ
        self._redactor = redactor
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._file_lock = threading.Lock()
        self._rate_locks: dict[str, asyncio.Lock] = {}
        self._sent: dict[str, collections.deque[float]] = {}
        # Apprise runs in its own small pool: a hung channel (we stop waiting at the
        # timeout, the thread cannot be killed) can never starve the record writes.
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=APPRISE_THREADS, thread_name_prefix="apprise")

    def close(self) -> None:
        """Stop the Apprise worker pool (queued deliveries are dropped, running ones end)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

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
                return 1, f"cannot append to {self.log_path}: {e.strerror}"
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
                loop = asyncio.get_running_loop()
                await asyncio.wait_for(
                    loop.run_in_executor(self._pool, _apprise_send, url,
                                         f"monitors: {monitor}", message),
                    spec.timeout,
                )
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
        with self._file_lock:
            atomic.make_dirs(self.log_path.parent)
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                         atomic.FILE_MODE)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
