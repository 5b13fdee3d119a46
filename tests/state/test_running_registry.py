"""The running registry's copy of a monitor (``running.json``): what is stored and what
is rebuilt from it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from reconciler.state import registry
from tests.factories import monitor

# one action of each type as written -> the mapping running.json stores (as ever)
ACTIONS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"type": "run", "command": ["bot", "{prompt}"], "prompt": "p", "env": {"A": "1"},
      "timeout": "5m"},
     {"type": "run", "agent": None, "command": ["bot", "{prompt}"], "prompt": "p",
      "cwd": None, "env": {"A": "1"}, "timeout": 300.0, "overlap": "skip"}),
    ({"type": "routine", "routine": "deploy"},
     {"type": "routine", "routine": "deploy", "prompt": "{{ event }}"}),
    ({"type": "notify", "channel": "phone"},
     {"type": "notify", "channel": "phone", "message": "{{ monitor.name }}: {{ event }}"}),
    ({"type": "webhook-out", "url": "https://h/x", "headers": {"A": "b"}, "maxTime": "1m"},
     {"type": "webhook-out", "url": "https://h/x", "secretEnv": None, "headers": {"A": "b"},
      "timeout": 10.0, "maxAttempts": 5, "maxTime": 60.0}),
]


@pytest.mark.parametrize(("action", "stored"), ACTIONS, ids=[a["type"] for a, _ in ACTIONS])
def test_the_typed_action_is_stored_as_its_mapping_and_rebuilt(
        action: dict[str, Any], stored: dict[str, Any]) -> None:
    m = monitor(action=action, condition={"mode": "match", "match": "x"})
    doc = json.loads(json.dumps(registry.monitor_to_json(m)))
    assert doc["action"] == stored and list(doc["action"]) == list(stored)
    back = registry.monitor_from_json(doc)
    assert back == m and dataclasses.is_dataclass(back.action)
    assert type(back.action) is type(m.action)


def test_an_unknown_action_type_is_not_rebuilt() -> None:
    doc = registry.monitor_to_json(monitor())
    doc["action"] = {"type": "page"}
    with pytest.raises(ValueError, match="unknown action type"):
        registry.monitor_from_json(doc)
