"""The ``webhook-out`` action: POST the event JSON, signed, with bounded retries.

Body: ``events.Event.to_json()`` (id, monitor, fingerprint, firedAt, event,
signature, observation excerpt, meta, groups, reason) plus ``version`` (1) and
``description``, serialized once; the exact bytes sent are the bytes signed.

Headers: ``Content-Type: application/json``, ``Idempotency-Key: <event id>``
(stable across retries and across a re-send after a crash),
``X-Monitors-Event: <event id>``, ``X-Monitors-Attempt: <n>``, and, when the
action's ``secretEnv`` names a set environment variable,
``X-Monitors-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` (GitHub's
scheme), plus the action's ``headers`` (``${ENV}`` expanded, values redacted).

Retries (RFC 9110 semantics): a connect error, a timeout, a 5xx, 408 or 429 is
retried with exponential backoff and jitter, waiting at least ``Retry-After``
(seconds or an HTTP date, RFC 9110 §10.2.3) when the server sends one; any
other 4xx (and 3xx: redirects are not followed) fails at once. At most
``maxAttempts`` attempts within ``maxTime`` seconds in total: a wait that would
pass ``maxTime`` (a long ``Retry-After`` included) ends the delivery as failed.
Each attempt, the answer's body included, ends within ``timeout`` (and what is left of
``maxTime``), and at most ``bounded.BODY_CAP`` bytes of the answer are held
(``bounded.request``): an answer that never ends is a timed-out attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import hashlib
import hmac
import inspect
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from reconciler import __version__ as VERSION
from reconciler.actions import bounded
from reconciler.events import EXCERPT_CHARS, Event
from reconciler.model import Monitor

SIGNATURE_HEADER = "X-Monitors-Signature-256"
RETRY_STATUSES = frozenset({408, 429})
BODY_VERSION = 1


@dataclass(frozen=True, slots=True)
class Delivery:
    """The outcome of one webhook-out delivery.

    Attributes:
        ok: a 2xx answer was received.
        attempts: requests made.
        status: the last HTTP status, None when no answer came.
        reason: why it failed (empty when ok).
    """

    ok: bool
    attempts: int
    status: int | None
    reason: str = ""


def body(monitor: Monitor, event: Event) -> bytes:
    """The exact JSON bytes POSTed for ``event`` (compact, UTF-8, keys in a fixed order)."""
    doc = {"version": BODY_VERSION, **event.to_json(), "description": monitor.description}
    doc["observation"] = str(doc["observation"])[:EXCERPT_CHARS]
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


def signature(secret: str, data: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``data`` keyed with ``secret`` (UTF-8)."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), data, hashlib.sha256).hexdigest()


def headers(event: Event, data: bytes, *, secret: str | None,
            extra: Mapping[str, str]) -> dict[str, str]:
    """The request headers (``X-Monitors-Attempt`` is added per attempt)."""
    out = {"User-Agent": f"monitors/{VERSION}", **extra}
    out["Content-Type"] = "application/json"
    out["Idempotency-Key"] = event.id
    out["X-Monitors-Event"] = event.id
    if secret:
        out[SIGNATURE_HEADER] = signature(secret, data)
    return out


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or HTTP-date), or None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    current = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    return max(0.0, when.timestamp() - current)


def _retryable(status: int) -> bool:
    return status >= 500 or status in RETRY_STATUSES


async def post(
    client: httpx.AsyncClient,
    url: str,
    data: bytes,
    request_headers: Mapping[str, str],
    *,
    timeout: float,
    max_attempts: int,
    max_time: float,
    backoff_base: float = 1.0,
    backoff_cap: float = 60.0,
    on_attempt: Callable[[int], Any] | None = None,
    done_before: int = 0,
) -> Delivery:
    """POST ``data`` to ``url`` with the retry policy of the module docstring.

    Args:
        timeout: seconds per attempt (cut to what is left of ``max_time``).
        max_attempts: attempts at most (>= 1).
        max_time: seconds for the whole delivery, waits included.
        backoff_base: the first wait in seconds; wait n is ``base * 2**(n-1)``
            times a jitter factor in [0.5, 1), capped at ``backoff_cap``.
        on_attempt: called with the attempt number before each request (counted
            from ``done_before``); an awaitable result is awaited before the request,
            so a record of the attempt can be made durable first.
        done_before: attempts already made for this event before a crash (a re-send
            after recovery): ``X-Monitors-Attempt`` and ``Delivery.attempts`` go on
            from there; ``max_attempts`` and ``max_time`` are this delivery's budget.

    Never raises for network or HTTP failures; they are the returned ``Delivery``.
    """
    deadline = time.monotonic() + max_time
    status: int | None = None
    reason = ""
    attempt = done_before
    last = done_before + max_attempts
    while attempt < last:
        attempt += 1
        left = deadline - time.monotonic()
        if left <= 0:
            return Delivery(False, attempt - 1, status,
                            f"{reason}; gave up: maxTime {max_time:g}s spent")
        if on_attempt is not None:
            pending = on_attempt(attempt)
            if inspect.isawaitable(pending):
                await pending
        wait_hint: float | None = None
        try:
            resp = await bounded.request(  # body capped, whole attempt bounded
                client, "POST", url, deadline=min(timeout, left),
                content=data,
                headers={**request_headers, "X-Monitors-Attempt": str(attempt)},
                timeout=httpx.Timeout(min(timeout, left)),
            )
        except httpx.TimeoutException:
            status, reason = None, f"attempt {attempt}: timed out"
        except httpx.TransportError as e:
            status, reason = None, f"attempt {attempt}: {type(e).__name__}: {e}"
        else:
            status = resp.status_code
            if 200 <= status < 300:
                return Delivery(True, attempt, status)
            reason = f"attempt {attempt}: HTTP {status}"
            if not _retryable(status):
                return Delivery(False, attempt, status, f"{reason} (not retried)")
            wait_hint = retry_after(resp.headers.get("Retry-After"))
        if attempt >= last:
            break
        nth = attempt - done_before  # waits start small again in a re-send
        delay = min(backoff_cap, backoff_base * 2 ** (nth - 1)) * (0.5 + random.random() / 2)
        if wait_hint is not None:
            delay = max(delay, wait_hint)
        left = deadline - time.monotonic()
        if delay >= left:
            if wait_hint is not None and wait_hint >= delay:
                why = f"Retry-After {wait_hint:g}s"
            else:
                why = f"next wait {delay:.2f}s"
            return Delivery(False, attempt, status,
                            f"{reason}; gave up: {why} exceeds what is left of maxTime "
                            f"{max_time:g}s")
        await asyncio.sleep(delay)
    return Delivery(False, attempt, status, f"{reason}; gave up after {attempt} attempt(s)")
