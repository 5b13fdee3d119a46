"""The action types, keyed by the YAML ``action.type``: the one table every caller reads.

Each entry is a type module (``run``, ``routine``, ``notify``, ``webhook_out``)
satisfying ``ActionKind``. Normalization (``config.normalize``), lint's reference
checks (``checks.references``) and template fields, descriptions (views,
``monitors test``), the writer's key order, crash recovery and dispatch all go
through ``TYPES``, so adding an action type is its module, one line here, its
schema branch, its tests and its README row.

Imports only the type modules' declarative halves (leaves, no asyncio, httpx or
Jinja2): ``monitors lint`` imports this. ``TYPES`` imports a type's module the first
time it is read (``typetable``), so a command pays only for the types it meets.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.actions.common import Recovery
from reconciler.addflags import AddFlag
from reconciler.typetable import TypeTable

if TYPE_CHECKING:
    from reconciler import model
    from reconciler.actions import notify, routine, run, webhook_out
    from reconciler.actions.dispatch import Dispatcher
    from reconciler.actions.options import ActionsConfig
    from reconciler.events import Event
    from reconciler.model import Monitor


class ActionKind(Protocol):
    """What a type module provides (module attributes and functions).

    ``spec`` below is the module's own frozen spec dataclass (``RunSpec``, ...).
    """

    TYPE: str
    RECOVERY: Recovery
    TEMPLATES: tuple[str, ...]
    FIELDS: tuple[str, ...]
    DURATIONS: tuple[str, ...]
    ADD: AddFlag

    def normalize(self, raw: Mapping[str, Any], /) -> Any:
        """The frozen spec of a schema-valid mapping (or of its ``to_json``)."""
        ...

    def to_json(self, spec: Any, /) -> dict[str, Any]:
        """The normalized mapping the fingerprint hashes."""
        ...

    def describe(self, spec: Any, /) -> str:
        """The one-line description list, view and plan show."""
        ...

    def preview(self, spec: Any, /) -> str:
        """What ``monitors test`` says the action would do."""
        ...

    def check(self, action: Mapping[str, Any], config: ActionsConfig | None, /,
              ) -> list[tuple[str, str]]:
        """Lint's reference checks: ``(dotted field, message)`` pairs."""
        ...

    def from_flag(self, value: str, prompt: str | None, /) -> dict[str, Any]:
        """The action ``monitors add`` writes for ``ADD.flag`` (raises ``UsageError``)."""
        ...

    async def fire(self, d: Dispatcher, monitor: Monitor, event: Event, spec: Any, *,
                   recovered: bool) -> None:
        """Carry the action out (detached where slow); raise ``MonitorsError`` to fail it."""
        ...


if TYPE_CHECKING:
    ActionSpec = (run.RunSpec | routine.RoutineSpec | notify.NotifySpec
                  | webhook_out.WebhookOutSpec)
    """Every typed action spec (``Monitor.action`` is one of these); for annotations."""

TYPES: TypeTable[ActionKind] = TypeTable("reconciler.actions", {
    "run": "run", "routine": "routine", "notify": "notify", "webhook-out": "webhook_out",
})
"""YAML ``action.type`` -> its module (imported when first read), in the
documentation's order. Each module's ``TYPE`` is its key (tests/actions/test_registry.py)."""

KEY_ORDER: tuple[str, ...] = (
    "type", "agent", "routine", "channel", "url", "command", "prompt", "message", "cwd", "env",
    "headers", "secretEnv", "timeout", "overlap", "maxAttempts", "maxTime",
)
"""The order the writer gives an action's keys (each type's ``FIELDS`` in this order)."""


@functools.cache
def template_fields() -> tuple[str, ...]:
    """Every action field that holds a Jinja2 template, of any type (lint checks them;
    imports every type module)."""
    return tuple(dict.fromkeys(f for k in TYPES.values() for f in k.TEMPLATES))


@functools.cache
def duration_fields() -> tuple[str, ...]:
    """Every action field that holds a duration, of any type (lint parses them; seconds
    once normalized; imports every type module)."""
    return tuple(k for k in KEY_ORDER if any(k in t.DURATIONS for t in TYPES.values()))


def kind(action: Mapping[str, Any] | model.ActionSpec) -> ActionKind:
    """The type module of an action: a typed spec, or a mapping (raw or normalized).

    Raises:
        KeyError: an unknown ``type`` (the schema lets none through).
    """
    if isinstance(action, Mapping):
        return TYPES[str(action.get("type"))]
    return TYPES[action.type]


def normalize(raw: Mapping[str, Any]) -> ActionSpec:
    """The typed spec of a schema-valid ``action`` mapping (``Monitor.action``; its
    ``to_json()`` is what the fingerprint hashes).

    Raises:
        ValueError: an unknown type, or a duration does not parse.
    """
    found = TYPES.get(str(raw["type"]))
    if found is None:
        raise ValueError(f"unknown action type {raw['type']!r}")
    spec: ActionSpec = found.normalize(raw)
    return spec


def from_json(data: Mapping[str, Any]) -> ActionSpec:
    """The spec whose ``to_json()`` is ``data`` (the running registry's copy).

    Raises:
        ValueError: an unknown type. KeyError: a required field is missing.
    """
    return normalize(data)


def recovery(action_type: str) -> Recovery:
    """What crash recovery does with an unfinished fire of ``action_type`` (an unknown
    type is interrupted: never re-sent)."""
    found = TYPES.get(action_type)
    return found.RECOVERY if found else Recovery.INTERRUPT
