"""Frozen value types shared by every stage of the pipeline (DESIGN.md §1-§4).

Nothing here does I/O. The shapes:

* A **spec** (``Spec``) is the *normalized* JSON-compatible mapping of a monitor's
  ``source``, ``condition`` or ``action``: every default filled in, every duration
  a float number of seconds, every optional key present (``None`` when unset).
  Normalization is ``config.normalize``; the fingerprint is computed over these
  three mappings only (``config.fingerprint``). Specs are treated as read-only.

  A monitor's **source** is a typed spec instead (``SourceSpec``): one frozen
  dataclass per source type, each in its module under ``reconciler.sources``
  (``sources.registry`` lists them); its ``to_json()`` is the normalized mapping.

  The condition is a typed value, ``conditions.spec.Condition`` (its ``to_json``
  gives the normalized mapping: ``mode``, ``match``, ``dedupeKey``, ``ignore``).

  A monitor's **action** is a typed spec too (``ActionSpec``): one frozen dataclass
  per action type (``actions.registry.TYPES``; the YAML ``action.type`` values are its
  keys). Its ``to_json()`` keys by ``type``::

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
from typing import TYPE_CHECKING, Any, ClassVar, NewType, Protocol

if TYPE_CHECKING:  # a type only: model stays a leaf at run time
    from reconciler.conditions.lifecycle import Lifecycle
    from reconciler.conditions.spec import Condition

MonitorName = NewType("MonitorName", str)
Fingerprint = NewType("Fingerprint", str)  # "sha256:<64 hex>"
DeviceName = NewType("DeviceName", str)

Spec = Mapping[str, Any]
"""A normalized source/condition/action mapping (JSON-compatible, read-only by convention)."""


class Scope(enum.StrEnum):
    """Which layer defined a monitor."""

    USER = "user"
    SYSTEM = "system"


class SourceSpec(Protocol):
    """A typed source spec: one frozen dataclass per type in ``reconciler.sources``
    (``sources.registry.SourceSpec`` is their union; the types are listed there)."""

    TYPE: ClassVar[str]
    """The YAML ``source.type``."""

    @property
    def interval(self) -> float | None:
        """Seconds between checks; None for a stream or a push source."""
        ...

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (camelCase keys; what the fingerprint hashes)."""
        ...

    def describe(self) -> str:
        """The one line list/view/plan/test show."""
        ...


class ActionSpec(Protocol):
    """A typed action spec: one frozen dataclass per type in ``reconciler.actions``
    (``actions.registry.ActionSpec`` is their union; the types are listed there)."""

    @property
    def type(self) -> str:
        """The YAML ``action.type``."""
        ...

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (camelCase keys; what the fingerprint hashes)."""
        ...

    def describe(self) -> str:
        """The one line list/view/plan/test show."""
        ...


class ConditionMode(enum.StrEnum):
    """The YAML ``condition.mode`` values (``Condition.mode``; each has its module in
    ``conditions.registry.MODES``)."""

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
        source: the typed source spec (``SourceSpec``).
        action: the typed action spec (``ActionSpec``).
        condition: the typed condition (``conditions.spec.Condition``).
        fingerprint: ``sha256:<hex>`` over source, condition and action.
        scope: the layer that defined it.
        origin: the file that defined it.
        enabled: False when the file says ``enabled: false``.
        pause: set when an overlay pauses it (``enabled`` stays as the file says).
        overlay: the overlay file patching it, if any.
        device: owner pin (only that device evaluates and fires it).
        devices: allowlist; each listed device fires independently. Empty: unset.
        owners: failover owners; whichever listed device holds the monitor's etcd
            lease evaluates and fires it, the others stand by (``daemon.leases``).
            Empty: unset. Never together with ``device``/``devices``.
        shared_input: None when unset (system built-ins then default to True).
        rate_limit: the firehose guard, or None.
        labels: string labels for selection (``pause -l team=ci``).
        allow_duplicate: the duplicate fingerprint is deliberate.
        description: free text.
        line: 1-based line of the document start in ``origin`` (for messages).
        lifecycle: ``until``/``stopAfter``/``stopWhen`` (``conditions.lifecycle``), or
            None when the monitor never ends itself.
    """

    name: MonitorName
    source: SourceSpec
    condition: Condition
    action: ActionSpec
    fingerprint: Fingerprint
    scope: Scope = Scope.USER
    origin: Path = Path("")
    enabled: bool = True
    pause: Pause | None = None
    overlay: Path | None = None
    device: DeviceName | None = None
    devices: tuple[DeviceName, ...] = ()
    owners: tuple[DeviceName, ...] = ()
    shared_input: bool | None = None
    rate_limit: RateLimit | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    allow_duplicate: bool = False
    description: str = ""
    line: int = 1
    lifecycle: Lifecycle | None = None

    @property
    def source_type(self) -> str:
        """The source's YAML ``type`` (a key of ``sources.registry.TYPES``)."""
        return self.source.TYPE

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
