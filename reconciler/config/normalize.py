"""Fill defaults and convert durations: a schema-valid document -> normalized specs.

The normalized shapes are listed in ``reconciler.model``. Two documents that
mean the same thing (``60s`` vs ``1m``, defaults written out or left implicit,
key order, quoting) normalize to equal mappings, which is what makes the
fingerprint stable. Input must already be schema-valid; semantic checks
(``config.semantic``) report bad durations before this runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler import durations
from reconciler.actions import registry as actions_registry
from reconciler.config import fingerprint
from reconciler.model import (
    DeviceName,
    Monitor,
    MonitorName,
    Pause,
    RateLimit,
    Scope,
)

DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_POLL_TIMEOUT_CAP = 60.0
DEFAULT_HTTP_TIMEOUT = 10.0
DEFAULT_INTERVALS = {"file": 10.0, "pid": 5.0, "device": 60.0}
DEFAULT_COMMAND_BACKOFF = 1.0
PID_EXIT_MATCH = "^exited$"


def _dur(value: Any, default: float) -> float:
    return default if value is None else durations.parse(value)


def _command(value: Any) -> str | list[str]:
    return value if isinstance(value, str) else [str(v) for v in value]


def _map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


def source(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return the normalized source spec for a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    kind = raw["type"]
    if kind == "poll":
        interval = durations.parse(raw["interval"])
        return {
            "type": kind,
            "command": _command(raw["command"]),
            "interval": interval,
            "timeout": _dur(raw.get("timeout"), min(interval, DEFAULT_POLL_TIMEOUT_CAP)),
            "cwd": raw.get("cwd"),
            "env": _map(raw.get("env")),
            "maxBytes": int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        }
    if kind == "command":
        return {
            "type": kind,
            "command": _command(raw["command"]),
            "cwd": raw.get("cwd"),
            "env": _map(raw.get("env")),
            "maxBytes": int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
            "backoff": _dur(raw.get("backoff"), DEFAULT_COMMAND_BACKOFF),
        }
    if kind == "poll-http":
        return {
            "type": kind,
            "url": raw["url"],
            "interval": durations.parse(raw["interval"]),
            "timeout": _dur(raw.get("timeout"), DEFAULT_HTTP_TIMEOUT),
            "headers": _map(raw.get("headers")),
            "followRedirects": bool(raw.get("followRedirects", False)),
            "maxBytes": int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        }
    if kind == "file":
        interval = _dur(raw.get("interval"), DEFAULT_INTERVALS["file"])
        return {
            "type": kind,
            "path": raw["path"],
            "interval": interval,
            "timeout": _dur(raw.get("timeout"), min(interval, 10.0)),
            "maxBytes": int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        }
    if kind == "pid":
        return {
            "type": kind,
            "pid": int(raw["pid"]),
            "interval": _dur(raw.get("interval"), DEFAULT_INTERVALS["pid"]),
            "force": bool(raw.get("force", False)),
        }
    if kind == "device":
        interval = _dur(raw.get("interval"), DEFAULT_INTERVALS["device"])
        return {
            "type": kind,
            "device": raw["device"],
            "interval": interval,
            "timeout": _dur(raw.get("timeout"), min(interval, 5.0)),
        }
    if kind == "ws":
        return {"type": kind, "url": raw["url"], "headers": _map(raw.get("headers"))}
    if kind == "webhook":
        return {
            "type": kind,
            "provider": raw["provider"],
            "events": sorted(str(e) for e in raw["events"]),
            "secretEnv": raw.get("secretEnv"),
        }
    raise ValueError(f"unknown source type {kind!r}")


def condition(raw: Mapping[str, Any] | None, *, source_type: str) -> dict[str, Any]:
    """Return the normalized condition spec.

    A missing condition defaults to ``on-change``, except for a ``pid`` source,
    whose default condition fires on exit (``match: ^exited$``).
    """
    if raw is None and source_type == "pid":
        raw = {"mode": "match", "match": PID_EXIT_MATCH}
    raw = raw or {}
    return {
        "mode": raw.get("mode", "on-change"),
        "match": raw.get("match"),
        "dedupeKey": raw.get("dedupeKey"),
        "ignore": list(raw.get("ignore") or []),
    }


def action(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Return the normalized action spec for a schema-valid ``action`` mapping
    (its type module's ``to_json(normalize(raw))``, through ``actions.registry``).

    Raises:
        ValueError: a duration does not parse.
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
    cond = condition(doc.get("condition"), source_type=src["type"])
    act = action(doc["action"])
    placement: Mapping[str, Any] = pin if pin else doc
    rate = doc.get("rateLimit")
    return Monitor(
        name=MonitorName(name),
        source=src,
        condition=cond,
        action=act,
        fingerprint=fingerprint.compute(src, cond, act),
        scope=scope,
        origin=origin,
        enabled=bool(doc.get("enabled", True)),
        pause=pause,
        overlay=overlay,
        device=DeviceName(placement["device"]) if placement.get("device") else None,
        devices=tuple(DeviceName(d) for d in placement.get("devices") or ()),
        shared_input=doc.get("sharedInput"),
        rate_limit=RateLimit(int(rate["max"]), durations.parse(rate["per"])) if rate else None,
        labels=_map(doc.get("labels")),
        allow_duplicate=bool(doc.get("allowDuplicate", False)),
        description=str(doc.get("description", "")),
        line=line,
    )
