"""The MCP tools: name, description, input JSON Schema and the operation behind each.

The monitor fields of ``monitor_watch`` and ``monitor_update`` are the monitor file's own
schema (``schemas/monitor.schema.json``: ``source``, ``condition``, ``action``,
placement, labels, ``until``/``stopAfter``/``stopWhen``), so an agent writes exactly
what a person would write in ``monitors.d/NAME.yml``. Arguments are checked against
these schemas before an operation runs (``check``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from reconciler import errors
from reconciler.mcpserver import operations
from reconciler.settings import Settings

NAME = {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,62}$",
        "description": "The monitor's name (its file is monitors.d/NAME.yml).",
        "examples": ["pr-1234-ci"]}
WAIT = {"type": "number", "minimum": 0, "maximum": 300, "default": operations.WAIT,
        "description": "Seconds to wait for the first poll after applying."}
GENERATION = {"type": "string", "pattern": "^g-[0-9a-f]{16}$",
              "description": "The generation read from monitor_inspect or monitor_list: the "
              "update is refused as a conflict when the file changed since.",
              "examples": ["g-3f2a9c0d41b7e8a2"]}


@dataclass(frozen=True)
class Tool:
    """One tool: ``run(settings, arguments, by)`` returns its structured result; ``writes``
    says whether it changes files (audited ``applied`` on success either way)."""

    name: str
    description: str
    schema: Mapping[str, Any]
    run: Callable[[Settings, Mapping[str, Any], str], dict[str, Any]]
    read_only: bool = False


def _object(properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": required,
            "additionalProperties": False}


@cache
def _monitor_fields() -> tuple[dict[str, Any], dict[str, Any]]:
    """``(properties, $defs)`` of the monitor schema for ``operations.DOC_KEYS``."""
    from reconciler.config import schemas

    doc = copy.deepcopy(schemas.document("monitor"))
    props = {k: doc["properties"][k] for k in operations.DOC_KEYS if k in doc["properties"]}
    return props, doc.get("$defs", {})


def _with_monitor(extra: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    props, defs = _monitor_fields()
    schema = _object({"name": NAME, **props, **extra}, required)
    schema["$defs"] = defs
    return schema


def _named(extra: Mapping[str, Any] | None = None,
           required: tuple[str, ...] = ()) -> dict[str, Any]:
    return _object({"name": NAME, **(extra or {})}, ["name", *required])


@cache
def tools() -> dict[str, Tool]:
    """Every tool by name, in the order ``tools/list`` shows them."""
    reason = {"type": "string", "minLength": 1, "maxLength": 500}
    found = [
        Tool("monitor_watch",
             "Create a monitor (create-only): refuses an existing name and an existing "
             "behaviour (same source, condition and action) on this device or a reachable "
             "fleet peer, naming it. Writes monitors.d/NAME.yml, lints it, applies it "
             "(starting the daemon when it is down) and waits for the first poll. Returns "
             "name, generation, first-poll result and liveness.",
             _with_monitor({"wait": WAIT}, ["name", "source", "action"]),
             lambda s, a, by: operations.watch(s, a, by=by)),
        Tool("monitor_list", "List the monitors of this device: status, generation, "
             "source, condition, action and liveness.", _object({}, []),
             lambda s, a, by: operations.listing(s), read_only=True),
        Tool("monitor_inspect",
             "One monitor in full: config, liveness, recent fires, lifecycle (until, "
             "stopAfter, stopWhen), generation and, once stopped, the stop reason.",
             _named({"fires": {"type": "integer", "minimum": 0, "maximum": 50, "default": 5,
                               "description": "How many recent fires to return."}}),
             lambda s, a, by: operations.inspect(s, a), read_only=True),
        Tool("monitor_test",
             "Evaluate a monitor once without acting or writing state: the observation, "
             "whether it would fire and why, and what the action would do.",
             _named(), lambda s, a, by: operations.test(s, a), read_only=True),
        Tool("monitor_update",
             "Replace a user monitor's definition, compare-and-replace on the generation you "
             "read: a conflict (naming the current generation) when the file changed since, "
             "and nothing is written. Refused while one of its actions is in flight. The "
             "fields replace the whole definition.",
             _with_monitor({"generation": GENERATION, "wait": WAIT},
                           ["name", "generation", "source", "action"]),
             lambda s, a, by: operations.update(s, a, by=by)),
        Tool("monitor_stop",
             "Stop a monitor for good, with a reason kept in the state and shown by "
             "monitor_inspect and `monitors view`: a user monitor's file is removed, a "
             "built-in is paused through an overlay.",
             _named({"reason": {**reason, "description": "Why it is stopped."}},
                    ("reason",)),
             lambda s, a, by: operations.stop(s, a, by=by)),
        Tool("monitor_pause",
             "Pause a monitor through an overlay (its file is not edited), with a reason "
             "and an optional expiry.",
             _named({"reason": {**reason, "description": "Why it is paused."},
                     "until": {"type": "string", "minLength": 1, "maxLength": 64,
                               "description": "A duration from now (2h, 1d) or an ISO time; "
                               "absent: until monitor_resume.",
                               "examples": ["2h", "2026-12-24T09:00:00Z"]}}),
             lambda s, a, by: operations.pause(s, a)),
        Tool("monitor_resume",
             "Resume a paused monitor: removes the overlay's pause and clears a rate-limit "
             "auto-pause.", _named(), lambda s, a, by: operations.resume(s, a)),
    ]
    return {t.name: t for t in found}


def check(tool: Tool, arguments: Mapping[str, Any]) -> None:
    """Validate ``arguments`` against ``tool.schema`` (JSON Schema 2020-12).

    Raises:
        errors.UsageError: ``field: message`` of the first error, one line.
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(dict(tool.schema))
    errs = sorted(validator.iter_errors(dict(arguments)),
                  key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
    if errs:
        first = errs[0]
        where = ".".join(str(p) for p in first.absolute_path) or "arguments"
        message = " ".join(first.message.split())
        raise errors.UsageError(f"{tool.name}: {where}: {message[:300]}")
