"""What every source spec shares: field documentation and the JSON mapping.

A leaf of the ``sources`` package (stdlib and ``durations`` only, no runtime
dependency), so ``config`` can normalize and lint without importing httpx or
asyncio. Each type module declares its spec as a frozen dataclass whose fields
carry ``doc(...)`` metadata (description, example, whether the default is shown);
``to_json`` and ``from_json`` map a spec to and from its normalized camelCase
mapping (what the fingerprint hashes) and the schema agreement test reads the docs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from reconciler import durations

DEFAULT_MAX_BYTES = 1024 * 1024
"""Cap on an observation's bytes (stdout, body, file content) unless ``maxBytes`` says."""


class SpecLike(Protocol):
    """A source spec dataclass (its ``TYPE`` is the YAML ``source.type``)."""

    TYPE: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Any]]


S = TypeVar("S", bound=SpecLike)


def doc(description: str, example: object, *, default: object = dataclasses.MISSING,
        optional: bool = False, **kw: Any) -> Any:
    """A dataclass field with schema documentation in its metadata.

    Args:
        description: the text editors show on hover (schema ``description``).
        example: one example value as written in YAML (schema ``examples``).
        default: the field default (also the schema ``default`` unless it is computed,
            i.e. a default of None documented in the description).
        optional: ``to_json`` leaves the field out while it is None, so adding it
            to a type keeps the fingerprints of monitors that do not use it.
        kw: passed on to ``dataclasses.field`` (``default_factory``).
    """
    meta = {"description": description, "example": example, "optional": optional}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta, **kw)
    return dataclasses.field(default=default, metadata=meta, **kw)


def camel(name: str) -> str:
    """``max_bytes`` -> ``maxBytes`` (the YAML key of a spec field)."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@functools.cache
def _keys(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """``(attribute, camelCase key, optional)`` of a spec class's fields, in order."""
    return tuple((f.name, camel(f.name), bool(f.metadata.get("optional")))
                 for f in dataclasses.fields(cls))


def to_json(spec: SpecLike) -> dict[str, Any]:
    """The normalized mapping of ``spec``: ``{"type": TYPE, <camelCase field>: value}``
    in field order, tuples as lists (JSON-compatible; the fingerprint's input); an
    optional field (``doc(optional=True)``) only when it is not None."""
    out: dict[str, Any] = {"type": spec.TYPE}
    for name, key, optional in _keys(type(spec)):
        value = getattr(spec, name)
        if optional and value is None:
            continue
        # most values are plain: skip the Mapping ABC's isinstance (a Python call) for them
        plain = value is None or value.__class__ in _SCALARS
        out[key] = value if plain or not isinstance(value, tuple | Mapping) else _plain(value)
    return out


_SCALARS = frozenset({str, int, float, bool})


def from_json(cls: type[S], data: Mapping[str, Any]) -> S:
    """The spec ``to_json`` gave ``data`` for (the running registry's copy).

    Raises:
        KeyError: a field is missing from ``data``.
    """
    kwargs: dict[str, Any] = {}
    for name, key, optional in _keys(cls):
        value = data.get(key) if optional else data[key]
        kwargs[name] = tuple(value) if isinstance(value, list) else value
    return cls(**kwargs)


def dur(value: Any, default: float) -> float:
    """Seconds of an optional duration (``default`` when None).

    Raises:
        ValueError: it does not parse (``durations.parse``).
    """
    return default if value is None else durations.parse(value)


def command(value: Any) -> str | tuple[str, ...]:
    """A command as written: a shell string, or argv (every item as a string)."""
    return value if isinstance(value, str) else tuple(str(v) for v in value)


def strings(value: Any) -> dict[str, str]:
    """A mapping of strings (``env``, ``headers``); None is empty."""
    return {str(k): str(v) for k, v in (value or {}).items()}


def command_text(value: str | tuple[str, ...]) -> str:
    """A command for one line of display: argv joined with spaces."""
    return value if isinstance(value, str) else " ".join(value)


def describe(kind: str, what: object, interval: float | None) -> str:
    """``poll: git rev-parse HEAD every 30s``: type, main value (cut to 60 characters),
    then the interval when there is one (the one line list/view/plan/test show)."""
    text = f"{kind}: {what}"
    if len(text) > 60:
        text = text[:57] + "..."
    if interval is not None:
        text += f" every {durations.format(float(interval))}"
    return text


def interval_flag(value: str, flag: str) -> str:
    """``value`` when it is a duration within 500ms..7d (an ``add`` interval as written).

    Raises:
        errors.UsageError: naming ``flag``.
    """
    from reconciler import errors

    try:
        seconds = durations.parse(value)
    except ValueError as e:
        raise errors.UsageError(f"{flag}: {e}") from None
    if not durations.MIN_INTERVAL <= seconds <= durations.MAX_INTERVAL:
        raise errors.UsageError(f"{flag}: interval {value!r} is outside 500ms..7d")
    return value
