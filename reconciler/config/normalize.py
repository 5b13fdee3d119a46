"""Fill defaults and convert durations: a schema-valid document -> normalized specs.

The normalized shapes are listed in ``reconciler.model``. Two documents that
mean the same thing (``60s`` vs ``1m``, defaults written out or left implicit,
key order, quoting) normalize to equal mappings, which is what makes the
fingerprint stable. Input must already be schema-valid; semantic checks
(``config.semantic``) report bad durations before this runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler import durations
from reconciler.actions import registry as actions_registry
from reconciler.conditions import lifecycle
from reconciler.conditions import spec as condition_spec
from reconciler.conditions.spec import Condition
from reconciler.config import fingerprint
from reconciler.model import (
    DeviceName,
    Monitor,
    MonitorName,
    Pause,
    RateLimit,
    Scope,
)
from reconciler.sources import registry as source_types


def _dur(value: Any, default: float) -> float:
    return default if value is None else durations.parse(value)


def _map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def source(raw: Mapping[str, Any]) -> source_types.SourceSpec:
    """Return the typed source spec for a schema-valid ``source`` mapping (its
    ``to_json()`` is the normalized mapping; ``sources.registry``).

    Raises:
        ValueError: a duration does not parse, or the type is unknown.
    """
    return source_types.normalize(raw)


def source_from_json(data: Mapping[str, Any]) -> source_types.SourceSpec:
    """The typed source spec of a normalized mapping (``SourceSpec.to_json()`` output,
    as the running registry stores it).

    Raises:
        KeyError, ValueError: ``data`` is not a normalized source mapping.
    """
    return source_types.from_json(data)


def condition(raw: Mapping[str, Any] | None, *, source_type: str) -> Condition:
    """The typed condition (``conditions.spec.normalize``: defaults live there).

    An ``onError`` equal to the source type's default (``sources.registry.default_on_error``)
    is stored as None, so writing the default out or leaving it implicit is one
    fingerprint."""
    cond = condition_spec.normalize(raw, source_type=source_type)
    if cond.on_error is not None and cond.on_error == source_types.default_on_error(source_type):
        cond = dataclasses.replace(cond, on_error=None)
    return cond


def action(raw: Mapping[str, Any]) -> actions_registry.ActionSpec:
    """Return the typed action spec for a schema-valid ``action`` mapping (its
    ``to_json()`` is the normalized mapping; ``actions.registry``).

    Raises:
        ValueError: a duration does not parse, or the type is unknown.
    """
    return actions_registry.normalize(raw)


def monitor(
    doc: Mapping[str, Any],
    *,
    name: str,
    scope: Scope = Scope.USER,
    origin: Path = Path(""),
    line: int = 1,
    pause: Pause | None = None,
    overlay: Path | None = None,
    pin: Mapping[str, Any] | None = None,
) -> Monitor:
    """Build a resolved ``Monitor`` from one schema-valid document.

    Args:
        doc: the parsed YAML mapping (schema-valid).
        name: the monitor's name (the file stem when ``doc`` has none).
        pause, overlay, pin: what an overlay patches on top (``pin`` is the
            overlay's ``{device}`` or ``{devices}``, replacing the file's placement).

    Raises:
        ValueError: a duration does not parse.
    """
    src = source(doc["source"])
    cond = condition(doc.get("condition"), source_type=src.TYPE)
    act = action(doc["action"])
    placement: Mapping[str, Any] = pin if pin else doc
    rate = doc.get("rateLimit")
    return Monitor(
        name=MonitorName(name),
        source=src,
        condition=cond,
        action=act,
        fingerprint=fingerprint.compute(src.to_json(), condition_spec.to_json(cond),
                                       act.to_json()),
        scope=scope,
        origin=origin,
        enabled=bool(doc.get("enabled", True)),
        pause=pause,
        overlay=overlay,
        device=DeviceName(placement["device"]) if placement.get("device") else None,
        devices=tuple(DeviceName(d) for d in placement.get("devices") or ()),
        owners=tuple(DeviceName(d) for d in placement.get("owners") or ()),
        shared_input=doc.get("sharedInput"),
        rate_limit=RateLimit(int(rate["max"]), durations.parse(rate["per"])) if rate else None,
        labels=_map(doc.get("labels")),
        allow_duplicate=bool(doc.get("allowDuplicate", False)),
        description=str(doc.get("description", "")),
        line=line,
        lifecycle=lifecycle.normalize(doc),
    )
