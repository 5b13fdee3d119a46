"""Frozen value types shared by every stage of the pipeline (DESIGN.md §1-§4).

Nothing here does I/O. The shapes:

* A **spec** (``Spec``) is the *normalized* JSON-compatible mapping of a monitor's
  ``source``, ``condition`` or ``action``: every default filled in, every duration
  a float number of seconds, every optional key present (``None`` when unset).
  Normalization is ``config.normalize``; the fingerprint is computed over these
  three mappings only (``config.fingerprint``). Specs are treated as read-only.

  Normalized source keys by ``type`` (durations in seconds)::

    poll       command (str | list[str]), interval, timeout, cwd, env, maxBytes
    command    command (str | list[str]), cwd, env, maxBytes, backoff
    poll-http  url, interval, timeout, headers, followRedirects, maxBytes
    file       path, interval, timeout, maxBytes
    pid        pid, interval, force
    device     device, interval, timeout
    ws         url, headers
    webhook    provider, events, secretEnv

  Normalized condition keys: ``mode`` (on-change | match | every), ``match``,
  ``dedupeKey``, ``ignore`` (list of regexes).

  Normalized action keys by ``type``: each action type module's ``to_json``
  (``actions.registry.TYPES``; the YAML ``action.type`` values are its keys)::

    run          agent, command, prompt, cwd, env, timeout, overlap
    routine      routine, prompt
    notify       channel, message
    webhook-out  url, secretEnv, headers, timeout, maxAttempts, maxTime

* A ``Monitor`` is one resolved monitor: identity (fingerprint), scope, origin
  file, placement and the overlay's pause, ready for the desired set.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NewType

MonitorName = NewType("MonitorName", str)
Fingerprint = NewType("Fingerprint", str)  # "sha256:<64 hex>"
DeviceName = NewType("DeviceName", str)

Spec = Mapping[str, Any]
"""A normalized source/condition/action mapping (JSON-compatible, read-only by convention)."""


class Scope(enum.StrEnum):
    """Which layer defined a monitor."""

    USER = "user"
    SYSTEM = "system"


class SourceType(enum.StrEnum):
    """The YAML ``source.type`` values."""

    COMMAND = "command"
    POLL = "poll"
    POLL_HTTP = "poll-http"
    FILE = "file"
    PID = "pid"
    DEVICE = "device"
    WS = "ws"
    WEBHOOK = "webhook"


POLLED_SOURCES = frozenset(
    {SourceType.POLL, SourceType.POLL_HTTP, SourceType.FILE, SourceType.PID, SourceType.DEVICE}
)
PUSH_SOURCES = frozenset({SourceType.WS, SourceType.WEBHOOK})


class ConditionMode(enum.StrEnum):
    """The YAML ``condition.mode`` values."""

    ON_CHANGE = "on-change"
    MATCH = "match"
    EVERY = "every"


class Severity(enum.StrEnum):
    """Severity of a lint problem."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Firehose guard: more than ``max`` fires within ``per`` seconds auto-pauses."""

    max: int
    per: float


@dataclass(frozen=True, slots=True)
class Pause:
    """A pause from a generated overlay (``monitors.d/overlays/NAME.yml``).

    Attributes:
        reason: free text, may be empty.
        until: expiry as an aware ISO-8601 string, or None for indefinite.
        author: who paused (from git config), may be empty.
        created: when the pause was made, ISO-8601, may be empty.
    """

    reason: str = ""
    until: str | None = None
    author: str = ""
    created: str = ""


@dataclass(frozen=True, slots=True)
class Monitor:
    """One resolved monitor: the unit of the desired set.

    Attributes:
        name: unique across both layers after shadowing.
        source, condition, action: normalized specs (see the module docstring).
        fingerprint: ``sha256:<hex>`` over source, condition and action.
        scope: the layer that defined it.
        origin: the file that defined it.
        enabled: False when the file says ``enabled: false``.
        pause: set when an overlay pauses it (``enabled`` stays as the file says).
        overlay: the overlay file patching it, if any.
        device: owner pin (only that device evaluates and fires it).
        devices: allowlist; each listed device fires independently. Empty: unset.
        shared_input: None when unset (system built-ins then default to True).
        rate_limit: the firehose guard, or None.
        labels: string labels for selection (``pause -l team=ci``).
        allow_duplicate: the duplicate fingerprint is deliberate.
        description: free text.
        line: 1-based line of the document start in ``origin`` (for messages).
    """

    name: MonitorName
    source: Spec
    condition: Spec
    action: Spec
    fingerprint: Fingerprint
    scope: Scope = Scope.USER
    origin: Path = Path("")
    enabled: bool = True
    pause: Pause | None = None
    overlay: Path | None = None
    device: DeviceName | None = None
    devices: tuple[DeviceName, ...] = ()
    shared_input: bool | None = None
    rate_limit: RateLimit | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    allow_duplicate: bool = False
    description: str = ""
    line: int = 1

    @property
    def source_type(self) -> SourceType:
        """The source's ``type`` as an enum."""
        return SourceType(self.source["type"])

    @property
    def active(self) -> bool:
        """Enabled in its file and not paused by an overlay."""
        return self.enabled and self.pause is None


@dataclass(frozen=True, slots=True)
class Observation:
    """What one check of a source saw.

    Attributes:
        text: the observation text (stdout, ``<status>\\n<body>``, file content, ...).
        meta: small JSON-compatible details (exit code, duration in seconds,
            stderr tail, mtime, truncated flag, ...).
    """

    text: str
    meta: Mapping[str, Any] = field(default_factory=dict)
