"""``ws``: a WebSocket whose frames are observations (validated, not evaluated yet).

The receiver that will hold the connection is not built: lint warns and the
engine skips the monitor (``sources.push``).
"""

from __future__ import annotations

import re
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

ADD = AddFlag("--ws", "URL", "Each frame pushed over a WebSocket.")
"""``monitors add --ws URL``."""


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


def from_flag(value: str, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--ws URL``.

    Raises:
        errors.UsageError: not a ws:// or wss:// URL.
    """
    if not re.match(r"^wss?://", value):
        raise errors.UsageError(f"--ws: expected a ws:// or wss:// URL, got {value!r}")
    return {"type": WsSpec.TYPE, "url": value}


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """The ``not-evaluated`` warning (``push.check``)."""
    return push.check(WsSpec.TYPE)
