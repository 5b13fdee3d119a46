"""The source types, keyed by the YAML ``source.type`` (STYLE.md habit 7).

Every caller that needs to know the source types goes through here: the schema
agreement test, lint's display order and semantic checks, normalization (and so
the fingerprint), the writer's key order, the one-line description of
list/view/plan/test, the engine's choice of poll, stream or skip, and ``add``.
Adding a source type is its module, its entry in ``TYPES``, its schema branch, its
tests and its README row.

Light on purpose: the type modules import only leaves at module level, so lint
imports this without httpx or asyncio. Runtime work (``observe``) imports what it
needs when called. ``TYPES`` imports a type's module the first time it is read
(``typetable``), so a command pays only for the types its monitors use.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.typetable import TypeTable

if TYPE_CHECKING:
    from reconciler.sources import StreamItem, command, device, file, http, pid, poll, webhook, ws
    from reconciler.sources.context import SourceContext

    SourceSpec = (poll.PollSpec | command.CommandSpec | http.HttpSpec | file.FileSpec
                  | pid.PidSpec | device.DeviceSpec | ws.WsSpec | webhook.WebhookSpec)
    """Every typed source spec (``Monitor.source`` is one of these); for annotations."""


class SourceType(Protocol):
    """What a source type module provides (see ``sources.poll`` for a full example)."""

    @property
    def Spec(self) -> type[SourceSpec]: ...

    def normalize(self, raw: Mapping[str, Any], /) -> SourceSpec:
        """The spec of a schema-valid ``source`` mapping (raises ValueError)."""
        ...

    def check(self, raw: Mapping[str, Any], /) -> list[Finding]:
        """Semantic findings for lint (position-free)."""
        ...

    async def observe(self, monitor: Monitor, ctx: SourceContext, /) -> Observation:
        """One check (raises ``errors.SourceError``)."""
        ...

    @property
    def ADD(self) -> AddFlag: ...

    def from_flag(self, value: Any, /, *, interval: str | None,
                  force: bool) -> dict[str, Any]:
        """The ``source`` mapping ``monitors add`` writes (raises ``errors.UsageError``)."""
        ...


TYPES: TypeTable[SourceType] = TypeTable("reconciler.sources", {
    "command": "command", "poll": "poll", "poll-http": "http", "file": "file", "pid": "pid",
    "device": "device", "ws": "ws", "webhook": "webhook",
})
"""YAML ``source.type`` -> its module (imported when first read), in display order
(DESIGN.md's order: lint's "expected one of" lists follow it). Each module's
``Spec.TYPE`` is its key (tests/sources/test_registry.py)."""

ADD_ORDER = ("poll", "command", "pid", "poll-http", "file", "device", "ws", "webhook")
"""The order ``monitors add --help`` and its messages list the source flags (a type not
listed comes last)."""

STREAMS = TYPES.flagged("STREAM")
"""The types evaluated as streams (``command``, ``ws``): ``stream(monitor, ctx)``."""

LINKS = TYPES.flagged("LINK")
"""Streams over a connection (``ws``): ``list`` shows connected / reconnecting."""

EAGER = TYPES.flagged("EAGER")
"""Types whose ``observe`` needs no ``asyncio`` task until it first waits (no
``asyncio.timeout``, anyio or httpx before then): the engine starts their polls on the
scheduler's callback and makes a task only when one waits (``daemon.eager``). ``pid``
(it reads ``/proc``); a type that waits at once gains nothing from it."""

PUSHED = TYPES.flagged("PUSH")
"""Push sources (``ws``, ``webhook``): never polled on a schedule; a ``ws`` is a stream,
a ``webhook`` is evaluated when the receiver hands it a delivery (``Engine.push``)."""


def waiting_text(kind: str) -> str | None:
    """What ``list`` shows for a monitor of type ``kind`` that has seen nothing yet: its
    module's ``WAITING`` (push sources), or None ("never polled")."""
    if kind not in TYPES:
        return None
    text = getattr(TYPES[kind], "WAITING", None)
    return str(text) if text else None

def default_on_error(kind: str) -> str:
    """Type ``kind``'s default ``condition.onError``: its module's ``ON_ERROR``, else
    ``ignore`` (also for an unknown type). ``observe`` where the outage of the watched
    thing is its event (``poll-http``, ``device``). Imports only that type's module."""
    if kind not in TYPES:
        return "ignore"
    return str(getattr(TYPES[kind], "ON_ERROR", "ignore"))


def on_error(monitor: Monitor) -> str:
    """``monitor``'s effective ``condition.onError``: its own, else its type's default."""
    return monitor.condition.on_error or default_on_error(monitor.source_type)


def normalize(raw: Mapping[str, Any]) -> SourceSpec:
    """The typed spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: an unknown type, or a duration that does not parse.
    """
    kind = raw["type"]
    if kind not in TYPES:
        raise ValueError(f"unknown source type {kind!r}")
    return TYPES[kind].normalize(raw)


def from_json(data: Mapping[str, Any]) -> SourceSpec:
    """The spec whose ``to_json()`` is ``data`` (the running registry's copy).

    Raises:
        ValueError: an unknown type. KeyError: a field is missing.
    """
    kind = data["type"]
    if kind not in TYPES:
        raise ValueError(f"unknown source type {kind!r}")
    return fields.from_json(TYPES[kind].Spec, data)


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """The type's semantic findings for a ``source`` mapping (none for an unknown or
    missing type: the schema reports that)."""
    kind = raw.get("type")
    return TYPES[kind].check(raw) if isinstance(kind, str) and kind in TYPES else []


def add_flags() -> list[tuple[str, AddFlag]]:
    """``(type, flag)`` for every source type, in ``ADD_ORDER``."""
    def rank(kind: str) -> int:
        return ADD_ORDER.index(kind) if kind in ADD_ORDER else len(ADD_ORDER)

    return [(kind, TYPES[kind].ADD) for kind in sorted(TYPES, key=rank)]


def from_flag(kind: str, value: Any, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping ``monitors add`` writes for type ``kind``'s flag ``value``.

    Raises:
        errors.UsageError: the value is not usable (one line naming the flag).
    """
    return TYPES[kind].from_flag(value, interval=interval, force=force)


def key_order(kind: object) -> tuple[str, ...]:
    """The key order of a written ``source`` of type ``kind`` (``config.writer``); the
    union of all types' orders for an unknown one."""
    if isinstance(kind, str) and kind in TYPES:
        return TYPES[kind].Spec.KEYS
    return tuple(dict.fromkeys(k for m in TYPES.values() for k in m.Spec.KEYS))


def describe(spec: SourceSpec) -> str:
    """The one line list/view/plan/test show for a source (``poll: make every 30s``)."""
    return spec.describe()


def observe(monitor: Monitor, ctx: SourceContext) -> Awaitable[Observation]:
    """One check of ``monitor`` through its source type: the type's ``observe``
    coroutine, to await (no coroutine of its own: this runs on every poll).

    Raises (when awaited):
        errors.SourceError: the check failed.
    """
    return TYPES[monitor.source.TYPE].observe(monitor, ctx)


def observer(monitor: Monitor) -> Callable[[Monitor, SourceContext], Awaitable[Observation]]:
    """``monitor``'s source type's ``observe`` function, for a caller that polls the
    same monitor many times (the engine looks it up once per started monitor; calling
    it is ``observe``)."""
    return TYPES[monitor.source.TYPE].observe


def is_stream(monitor: Monitor) -> bool:
    """True when the engine evaluates ``monitor`` as a stream (``command``, ``ws``)."""
    return monitor.source_type in STREAMS


def is_eager(monitor: Monitor) -> bool:
    """True when ``monitor``'s source type is in ``EAGER``."""
    return monitor.source_type in EAGER


def is_pushed(monitor: Monitor) -> bool:
    """True when ``monitor`` is not polled on a schedule (``ws``, ``webhook``)."""
    return monitor.source_type in PUSHED


def stream(monitor: Monitor, ctx: SourceContext) -> AsyncGenerator[StreamItem, None]:
    """The stream of a stream type's ``monitor`` (its module's ``stream``)."""
    module: Any = TYPES[monitor.source_type]
    items: AsyncGenerator[StreamItem, None] = module.stream(monitor, ctx)
    return items


def pushed_as(kind: str) -> str | None:
    """The ``monitors test`` option pushing to type ``kind`` (``--payload``, ``--frame``),
    None when nothing is pushed to it."""
    if kind not in TYPES:
        return None
    option = getattr(TYPES[kind], "PUSHED_AS", None)
    return str(option) if option else None


def pushed(monitor: Monitor, data: bytes, *, event: str | None = None) -> Observation:
    """The observation a push source's ``monitor`` makes of ``data`` (a webhook
    delivery's body with its ``event``, a ws frame): its module's ``pushed``
    (``monitors test --payload/--frame``, replay steps).

    Raises:
        errors.UsageError: ``monitor``'s type is not a push source.
        errors.SourceError: kind ``select``.
    """
    from reconciler import errors

    module: Any = TYPES[monitor.source_type]
    if pushed_as(monitor.source_type) is None:
        raise errors.UsageError(f"{monitor.name} is a {monitor.source_type} source: nothing "
                                "is pushed to it (--payload is for webhook, --frame for ws)")
    observation: Observation = module.pushed(monitor, data, event=event)
    return observation
