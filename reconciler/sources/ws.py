"""``ws``: a WebSocket whose frames are observations (validated, not evaluated yet).

The receiver that will hold the connection is not built: lint warns and the
engine skips the monitor (``sources.push``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from reconciler.sources import fields, push
from reconciler.sources.fields import Finding, doc

observe = push.observe
PUSH = True
"""Pushed, not polled: validated, not evaluated yet."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsSpec:
    """A ``ws`` source: the WebSocket at ``url``."""

    TYPE: ClassVar[str] = "ws"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "url", "headers")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    url: str = doc("The ws:// or wss:// URL to connect to.", "wss://example.com/events")
    headers: Mapping[str, str] = doc(
        "Handshake headers; values may use ${NAME} (never printed).",
        {"Authorization": "Bearer ${API_TOKEN}"}, default_factory=dict)

    @property
    def interval(self) -> None:
        """Pushed: no interval."""
        return None

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``ws: wss://example.com/events``."""
        return fields.describe(self.TYPE, self.url, None)


Spec = WsSpec


def normalize(raw: Mapping[str, Any]) -> WsSpec:
    """The spec of a schema-valid ``source`` mapping."""
    return WsSpec(url=raw["url"], headers=fields.strings(raw.get("headers")))


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """The ``not-evaluated`` warning (``push.check``)."""
    return push.check(WsSpec.TYPE)
