"""``webhook``: signed deliveries from a provider, pushed to the daemon's HTTP server.

The receiver is ``server.hooks`` (routes) and ``daemon.deliveries`` (spool, replay
window, evaluation); this module is what is known about the type: its spec, and the
pure rules of a delivery that both use:

* **Signatures** (``signature_ok``): HMAC-SHA256 of the raw body, compared in
  constant time (``hmac.compare_digest``). GitHub sends ``X-Hub-Signature-256:
  sha256=<hex>`` (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries),
  Linear ``Linear-Signature: <hex>`` (https://linear.app/developers/webhooks), the
  generic receiver ``X-Monitors-Signature-256: sha256=<hex>`` (GitHub's form).
* **Which event** (``event_of``): GitHub's ``X-GitHub-Event`` header, Linear's
  payload ``type``, the generic receiver's ``X-Monitors-Event`` header (else
  ``delivery``); the payload's ``action`` refines it (``pull_request.closed``).
* **Which monitors** (``matches``): ``events: [pull_request]`` takes every action,
  ``pull_request.closed`` only that action.
* **The observation** (``observation``): the JSON body as text, or ``select``
  (JMESPath) applied to it; ``meta`` carries provider, event, action and delivery id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields, push
from reconciler.sources import select as select_mod
from reconciler.sources.fields import doc

observe = push.observe
PUSH = True
"""Pushed, not polled: delivered by the daemon's receiver (``daemon.deliveries``)."""
PUSHED_AS = "--payload"
"""The ``monitors test`` option that pushes to this type (``sources.registry.pushed``)."""
WAITING = "waiting for a delivery"
"""What ``list`` shows before the first delivery (instead of "never polled")."""

PROVIDERS = ("github", "linear")
"""The providers ``add --on`` accepts."""
SIGNED_BY = {"github": "X-Hub-Signature-256", "linear": "Linear-Signature",
             "generic": "X-Monitors-Signature-256"}
"""provider -> the header carrying the body's HMAC-SHA256 (every provider the schema has)."""
DELIVERY_HEADER = {"github": "X-GitHub-Delivery", "linear": "Linear-Delivery",
                   "generic": "X-Monitors-Delivery"}
"""provider -> the header carrying the delivery's unique id (the replay window's key)."""
MAX_DELIVERY_ID = 200
"""Characters a delivery id may have (GitHub's and Linear's are UUIDs, 36): a longer one
is refused (400) before it reaches the replay window or the log."""
DEFAULT_SECRET_ENV = {"github": "GITHUB_WEBHOOK_SECRET", "linear": "LINEAR_WEBHOOK_SECRET",
                      "generic": "MONITORS_WEBHOOK_SECRET"}
"""provider -> the environment variable holding the secret when ``secretEnv`` is not set."""
LINEAR_MAX_SKEW = 60.0
"""Seconds Linear's ``webhookTimestamp`` may differ from now (Linear's documented check)."""

ADD = AddFlag("--on", "SRC:EVENT",
              "A signed webhook delivery, e.g. github:pull_request (repeatable).",
              multiple=True)
"""``monitors add --on SRC:EVENT [--on SRC:EVENT ...]``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookSpec:
    """A ``webhook`` source: ``events`` delivered by ``provider``."""

    TYPE: ClassVar[str] = "webhook"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "provider", "events", "secretEnv", "select")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    provider: str = doc("Who delivers the events: github (POST /hooks/github), linear "
                        "(POST /hooks/linear) or generic (POST /hooks/generic/<monitor>).",
                        "github")
    events: tuple[str, ...] = doc(
        "The provider's event names to receive (kept sorted); EVENT.ACTION also filters "
        "on the payload's action (pull_request.closed). Linear: Issue, Comment, ...",
        ["pull_request", "push"])
    secret_env: str | None = doc(
        "The environment variable holding the signing secret. Default: "
        "GITHUB_WEBHOOK_SECRET, LINEAR_WEBHOOK_SECRET or MONITORS_WEBHOOK_SECRET.",
        "GITHUB_WEBHOOK_SECRET", default=None)
    select: str | None = doc(select_mod.DESCRIPTION.format(what="payload"),
                             "pull_request.title", default=None, optional=True)

    @property
    def interval(self) -> None:
        """Pushed: no interval."""
        return None

    @property
    def secret_name(self) -> str:
        """The environment variable holding the secret (``secretEnv`` or the default)."""
        return self.secret_env or DEFAULT_SECRET_ENV[self.provider]

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``webhook: github pull_request, push``."""
        return fields.describe(self.TYPE, f"{self.provider} {', '.join(self.events)}", None)


Spec = WebhookSpec


def normalize(raw: Mapping[str, Any]) -> WebhookSpec:
    """The spec of a schema-valid ``source`` mapping."""
    return WebhookSpec(provider=raw["provider"],
                       events=tuple(sorted(str(e) for e in raw["events"])),
                       secret_env=raw.get("secretEnv"), select=raw.get("select"))


def from_flag(value: tuple[str, ...], *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--on SRC:EVENT`` given one or more times.

    Raises:
        errors.UsageError: not SRC:EVENT with a known provider, or two providers.
    """
    providers, events = set(), []
    for item in value:
        provider, sep, event = item.partition(":")
        if not sep or provider not in PROVIDERS or not event:
            raise errors.UsageError(
                f"--on: expected SRC:EVENT with SRC one of {', '.join(PROVIDERS)} "
                f"(e.g. github:pull_request), got {item!r}"
            )
        providers.add(provider)
        events.append(event)
    if len(providers) > 1:
        raise errors.UsageError("--on: one webhook provider per monitor; got "
                                + ", ".join(sorted(providers)))
    return {"type": WebhookSpec.TYPE, "provider": providers.pop(), "events": events}


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """``select`` compiles (``sources.select.check``)."""
    return select_mod.check(raw)


# -- deliveries (pure: the receiver and ``monitors test --payload`` use them) ------------


def signature(secret: str | bytes, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``body`` under ``secret`` (UTF-8 when text)."""
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def signature_ok(provider: str, secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` (the value of ``SIGNED_BY[provider]``) signs ``body`` with
    ``secret``: ``sha256=<hex>`` for github and generic, bare ``<hex>`` for linear.
    Compared in constant time; an empty secret or a missing header never matches."""
    if not secret or not header:
        return False
    given = header.strip()
    if provider != "linear":
        scheme, sep, given = given.partition("=")
        if not sep or scheme != "sha256":
            return False
    return hmac.compare_digest(given.lower().encode("ascii", "replace"),
                               signature(secret, body).encode())


def parse(body: bytes) -> Any:
    """The JSON payload of ``body`` (None when it is not a JSON document)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def event_of(provider: str, headers: Mapping[str, str], payload: Any) -> tuple[str, str | None]:
    """``(event, action)`` of a delivery (module docstring); ``action`` is the payload's
    ``action`` string, or None."""
    data = payload if isinstance(payload, dict) else {}
    if provider == "github":
        event = headers.get("X-GitHub-Event", "")
    elif provider == "linear":
        event = str(data.get("type") or headers.get("Linear-Event", ""))
    else:
        event = headers.get("X-Monitors-Event", "") or "delivery"
    action = data.get("action")
    return event, action if isinstance(action, str) else None


def matches(spec: WebhookSpec, event: str, action: str | None) -> bool:
    """Whether a delivery of ``event``/``action`` is one of ``spec.events`` (``EVENT``
    any action, ``EVENT.ACTION`` that action only; ``*`` every event)."""
    for wanted in spec.events:
        name, _, want_action = wanted.partition(".")
        if name in ("*", event) and (not want_action or want_action == action):
            return True
    return False


def linear_fresh(payload: Any, now: float, skew: float = LINEAR_MAX_SKEW) -> bool:
    """Whether Linear's ``webhookTimestamp`` (Unix milliseconds) is within ``skew``
    seconds of ``now`` (Unix seconds): Linear's replay guard."""
    stamp = payload.get("webhookTimestamp") if isinstance(payload, dict) else None
    if not isinstance(stamp, int | float) or isinstance(stamp, bool):
        return False
    return abs(now - float(stamp) / 1000.0) <= skew


def observation(monitor: Monitor, body: bytes, *, event: str, action: str | None,
                delivery: str | None) -> Observation:
    """The observation a delivery makes for ``monitor`` (a webhook monitor): the body as
    text, or its ``select`` (meta: ``provider``, ``event``, ``action``, ``delivery``).

    Raises:
        errors.SourceError: kind ``select``: not JSON, or the expression fails.
    """
    spec = monitor.source
    assert isinstance(spec, WebhookSpec)
    meta = {"provider": spec.provider, "event": event, "action": action,
            "delivery": delivery}
    observed = Observation(body.decode("utf-8", "replace"), meta)
    return observed if spec.select is None else select_mod.observation(spec.select, observed)


def pushed(monitor: Monitor, data: bytes, *, event: str | None = None) -> Observation:
    """The observation of a delivery body ``data`` for a dry run (``monitors test
    --payload FILE [--event E]``): ``event`` is ``E`` or, without it, the first of the
    monitor's ``events``; the action is the payload's.

    Raises:
        errors.SourceError: kind ``select``.
        errors.UsageError: the receiver would not hand this delivery to ``monitor``
            (``matches``: another event, or another action than ``EVENT.ACTION``).
    """
    spec = monitor.source
    assert isinstance(spec, WebhookSpec)
    payload = parse(data)
    action = payload.get("action") if isinstance(payload, dict) else None
    name, _, wanted = (event or spec.events[0]).partition(".")
    action = action if isinstance(action, str) else (wanted or None)
    if not matches(spec, name, action):
        given = f"{name}.{action}" if action else name
        raise errors.UsageError(
            f"{monitor.name} takes {', '.join(spec.events)}: a {given} delivery is not "
            "evaluated by it (--event, or the payload's action)")
    return observation(monitor, data, event=name, action=action, delivery=None)
