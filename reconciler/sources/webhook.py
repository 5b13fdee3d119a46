"""``webhook``: signed deliveries from a provider (validated, not evaluated yet).

The receiver that will verify and deliver them is not built: lint warns and the
engine skips the monitor (``sources.push``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.sources import fields, push
from reconciler.sources.fields import doc

observe = push.observe
PUSH = True
"""Pushed, not polled: validated, not evaluated yet."""

PROVIDERS = ("github", "linear")
"""The providers ``add --on`` accepts (the schema's ``provider`` enum)."""
ADD = AddFlag("--on", "SRC:EVENT",
                     "A signed webhook delivery, e.g. github:pull_request (repeatable).",
                     multiple=True)
"""``monitors add --on SRC:EVENT [--on SRC:EVENT ...]``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookSpec:
    """A ``webhook`` source: ``events`` delivered by ``provider``."""

    TYPE: ClassVar[str] = "webhook"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "provider", "events", "secretEnv")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    provider: str = doc("Who delivers the events.", "github")
    events: tuple[str, ...] = doc("The provider's event names to receive (kept sorted).",
                                  ["pull_request", "push"])
    secret_env: str | None = doc("The environment variable holding the signing secret.",
                                 "GITHUB_WEBHOOK_SECRET", default=None)

    @property
    def interval(self) -> None:
        """Pushed: no interval."""
        return None

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``webhook: github``."""
        return fields.describe(self.TYPE, self.provider, None)


Spec = WebhookSpec


def normalize(raw: Mapping[str, Any]) -> WebhookSpec:
    """The spec of a schema-valid ``source`` mapping."""
    return WebhookSpec(provider=raw["provider"],
                       events=tuple(sorted(str(e) for e in raw["events"])),
                       secret_env=raw.get("secretEnv"))


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
    """The ``not-evaluated`` warning (``push.check``)."""
    return push.check(WebhookSpec.TYPE)
