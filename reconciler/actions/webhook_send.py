"""POST a webhook-out body with the shared retry policy: the runtime half of ``webhook-out``.

What is retried (RFC 9110 semantics): a connect error, a timeout, a 5xx, 408 or 429
(``retry.retryable_status``), waiting at least ``Retry-After`` (``retry.retry_after``)
when the server sends one; any other 4xx (and 3xx: redirects are not followed) fails
at once. At most ``maxAttempts`` attempts within ``maxTime`` seconds in total: a wait
that would pass ``maxTime`` (a long ``Retry-After`` included) ends the delivery as
failed (``retry.Policy.gives_up``). Each attempt, the answer's body included, ends
within ``timeout`` (and what is left of ``maxTime``), and at most ``bounded.BODY_CAP``
bytes of the answer are held (``bounded.request``): an answer that never ends is a
timed-out attempt.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from reconciler.actions import bounded, retry


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


async def post(
    client: httpx.AsyncClient,
    url: str,
    data: bytes,
    request_headers: Mapping[str, str],
    *,
    timeout: float,
    policy: retry.Policy,
    on_attempt: Callable[[int], Any] | None = None,
    done_before: int = 0,
) -> Delivery:
    """POST ``data`` to ``url`` with the retry policy of the module docstring.

    Args:
        timeout: seconds per attempt (cut to what is left of ``policy.max_time``).
        policy: attempts, total time (``max_time``, required here) and backoff waits.
        on_attempt: called with the attempt number before each request (counted
            from ``done_before``); an awaitable result is awaited before the request,
            so a record of the attempt can be made durable first.
        done_before: attempts already made for this event before a crash (a re-send
            after recovery): ``X-Monitors-Attempt`` and ``Delivery.attempts`` go on
            from there; ``policy`` is this delivery's budget.

    Never raises for network or HTTP failures; they are the returned ``Delivery``.
    """
    max_time = policy.max_time if policy.max_time is not None else float("inf")
    deadline = time.monotonic() + max_time
    status: int | None = None
    reason = ""
    attempt = done_before
    last = done_before + policy.max_attempts
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
            if not retry.retryable_status(status):
                return Delivery(False, attempt, status, f"{reason} (not retried)")
            wait_hint = retry.retry_after(resp.headers.get("Retry-After"))
        if attempt >= last:
            break
        # waits start small again in a re-send
        delay = policy.delay(attempt - done_before, hint=wait_hint)
        why = policy.gives_up(delay, left=deadline - time.monotonic(), hint=wait_hint)
        if why is not None:
            return Delivery(False, attempt, status,
                            f"{reason}; gave up: {why} exceeds what is left of maxTime "
                            f"{max_time:g}s")
        await asyncio.sleep(delay)
    return Delivery(False, attempt, status, f"{reason}; gave up after {attempt} attempt(s)")
