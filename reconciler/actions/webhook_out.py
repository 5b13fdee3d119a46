"""The ``webhook-out`` action type: POST the event JSON, signed, with bounded retries.

All that is known about ``webhook-out`` (README: Actions): its spec and defaults,
normalization, description, ``test`` preview, crash recovery (at-least-once: re-sent
with the same event id and the very bytes first sent) and ``fire``; the request is
built here, sent by ``actions.webhook_send`` (httpx, imported when a fire happens:
this module imports only leaves).

Body: ``events.Event.to_json()`` (id, monitor, fingerprint, firedAt, event,
signature, observation excerpt, meta, groups, reason) plus ``version`` (1) and
``description``, serialized once; the exact bytes sent are the bytes signed.

Headers: ``Content-Type: application/json``, ``Idempotency-Key: <event id>``
(stable across retries and across a re-send after a crash),
``X-Monitors-Event: <event id>``, ``X-Monitors-Attempt: <n>``, and, when the
action's ``secretEnv`` names a set environment variable,
``X-Monitors-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` (GitHub's
scheme), plus the action's ``headers`` (``${ENV}`` expanded, values redacted).

Retries: ``actions.retry`` (the policy notify uses too) with ``maxAttempts`` and
``maxTime``; what is retried, and how each attempt is bounded in time and memory
(``actions.bounded``), is in ``actions.webhook_send``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import __version__ as VERSION
from reconciler import errors
from reconciler.actions.common import Recovery, mapping, seconds
from reconciler.actions.options import ActionsConfig
from reconciler.addflags import AddFlag

if TYPE_CHECKING:
    from reconciler.actions.dispatch import Dispatcher
    from reconciler.events import Event
    from reconciler.model import Monitor

TYPE = "webhook-out"
RECOVERY = Recovery.RESEND
TEMPLATES: tuple[str, ...] = ()
FIELDS: tuple[str, ...] = ("url", "headers", "secretEnv", "timeout", "maxAttempts", "maxTime")
DURATIONS: tuple[str, ...] = ("timeout", "maxTime")  # fields holding durations (seconds)
SIGNATURE_HEADER = "X-Monitors-Signature-256"
BODY_VERSION = 1
DEFAULT_TIMEOUT = 10.0  # seconds per attempt
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_MAX_TIME = 120.0  # seconds for the whole delivery, waits included
ADD = AddFlag("--webhook-out", "URL", "POST the event JSON to URL.")


@dataclass(frozen=True, slots=True)
class WebhookOutSpec:
    """A normalized ``webhook-out`` action.

    Attributes:
        url: the receiver (``${ENV}`` expanded at fire time).
        secret_env: the environment variable holding the HMAC secret, or None (unsigned).
        headers: extra request headers (values may reference ``${ENV}``).
        timeout: seconds per attempt.
        max_attempts: attempts at most.
        max_time: seconds for the whole delivery, waits included.
    """

    url: str
    secret_env: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_time: float = DEFAULT_MAX_TIME
    type: str = TYPE

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping the fingerprint hashes (``to_json`` below)."""
        return to_json(self)

    def describe(self) -> str:
        """The one line list/view/plan/test show (``describe`` below)."""
        return describe(self)


def normalize(raw: Mapping[str, Any]) -> WebhookOutSpec:
    """The spec of a schema-valid ``webhook-out`` mapping (or of its ``to_json``).

    Raises:
        ValueError: a duration does not parse.
    """
    return WebhookOutSpec(
        url=raw["url"],
        secret_env=raw.get("secretEnv"),
        headers=mapping(raw.get("headers")),
        timeout=seconds(raw.get("timeout"), DEFAULT_TIMEOUT),
        max_attempts=int(raw.get("maxAttempts", DEFAULT_MAX_ATTEMPTS)),
        max_time=seconds(raw.get("maxTime"), DEFAULT_MAX_TIME),
    )


def to_json(spec: WebhookOutSpec) -> dict[str, Any]:
    """The normalized mapping the fingerprint hashes."""
    return {
        "type": TYPE,
        "url": spec.url,
        "secretEnv": spec.secret_env,
        "headers": dict(spec.headers),
        "timeout": spec.timeout,
        "maxAttempts": spec.max_attempts,
        "maxTime": spec.max_time,
    }


def describe(spec: WebhookOutSpec) -> str:
    """``webhook-out https://...``."""
    return f"{TYPE} {spec.url}"


def preview(spec: WebhookOutSpec) -> str:
    """What ``monitors test`` says the action would do."""
    return f"would POST the event JSON to {spec.url}"


def check(action: Mapping[str, Any], config: ActionsConfig | None) -> list[tuple[str, str]]:
    """Nothing beyond the schema and the URL checks of ``config.semantic``."""
    return []


def from_flag(value: str, prompt: str | None) -> dict[str, Any]:
    """The action ``monitors add --webhook-out URL`` writes.

    Raises:
        errors.UsageError: not an http:// or https:// URL.
    """
    if not re.match(r"^https?://", value):
        raise errors.UsageError(
            f"--webhook-out: expected an http:// or https:// URL, got {value!r}")
    return {"type": TYPE, "url": value}


def body(monitor: Monitor, event: Event) -> bytes:
    """The exact JSON bytes POSTed for ``event`` (compact, UTF-8, keys in a fixed order)."""
    from reconciler.events import EXCERPT_CHARS

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


def request(d: Dispatcher, monitor: Monitor, event: Event, spec: WebhookOutSpec, *,
            sent: bytes | None = None) -> tuple[str, bytes, dict[str, str]]:
    """URL, body and headers of a webhook-out; ``sent``: the bytes a first attempt
    sent (a re-send after a crash repeats them, so its signature is the same).

    Raises:
        errors.ActionError: a ``${ENV}`` in the URL or a header is not set.
    """
    import logging

    from reconciler.actions import options

    url = options.expand(spec.url, environ=d.environ, redactor=d.redactor)
    extra = {k: options.expand(v, environ=d.environ, redactor=d.redactor)
             for k, v in spec.headers.items()}
    secret = d.environ.get(spec.secret_env) if spec.secret_env else None
    if secret:
        d.redactor.add(secret)
    elif spec.secret_env:
        logging.getLogger("monitors.actions").warning(
            "%s: secretEnv %s is not set: webhook-out sent unsigned", monitor.name,
            spec.secret_env)
    data = sent if sent is not None else body(monitor, event)
    return url, data, headers(event, data, secret=secret, extra=extra)


async def fire(d: Dispatcher, monitor: Monitor, event: Event, spec: WebhookOutSpec, *,
               recovered: bool) -> None:
    """POST the event, detached. A re-send after a crash (``recovered``) repeats the
    body first sent and goes on counting attempts from the record.

    Raises:
        errors.MonitorsError: a ``${ENV}`` reference is not set.
    """
    from reconciler import timestamps
    from reconciler.actions import retry, webhook_send
    from reconciler.actions.records import FireStatus

    record = await d.read_fire(monitor.name, event.id, why="re-sent body rebuilt from "
                               "the event") if recovered else {}
    sent = record.get("body")
    url, data, request_headers = request(
        d, monitor, event, spec, sent=sent.encode("utf-8") if isinstance(sent, str) else None)
    extra: dict[str, Any] = {"recovered": True} if recovered else {}

    async def deliver() -> None:
        # the body as sent (the record's JSON would not keep its key order), so a
        # re-send after a crash repeats the very bytes and signature of this one
        await d.update(monitor.name, event.id, status=str(FireStatus.DISPATCHED),
                       action=TYPE, dispatchedAt=timestamps.utc_micro(),
                       signed=SIGNATURE_HEADER in request_headers,
                       body=data.decode("utf-8"), **extra)
        # A re-send after a crash goes on counting: the record holds the attempts
        # started before (each is recorded before its request is made).
        before = _attempts(await d.read_fire(monitor.name, event.id,
                                             why="re-send counts attempts from 0")
                           if recovered else {})

        async def started(attempt: int) -> None:
            await d.update(monitor.name, event.id, attempts=attempt)

        delivery = await webhook_send.post(
            d.http_client(), url, data, request_headers, timeout=spec.timeout,
            policy=retry.Policy(max_attempts=spec.max_attempts, max_time=spec.max_time,
                                base=d.backoff_base, cap=d.backoff_cap),
            on_attempt=started, done_before=before,
        )
        await d.finish(monitor, event,
                       FireStatus.SUCCEEDED if delivery.ok else FireStatus.FAILED,
                       attempts=delivery.attempts, httpStatus=delivery.status,
                       reason=delivery.reason)

    d.spawn(d.delivery(TYPE, monitor, event, deliver()), f"webhook-out:{monitor.name}:{event.id}")


def _attempts(record: Mapping[str, Any]) -> int:
    """``attempts`` of a fire record (0 when missing or not a positive integer)."""
    value = record.get("attempts")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
