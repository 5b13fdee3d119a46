"""The action registry and the type modules' declarative half (spec, normalize, to_json,
describe, preview, check, recovery)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from reconciler.actions import options, registry
from reconciler.actions.common import Recovery

# schema form -> the normalized mapping the fingerprint hashes (keys in this order)
NORMALIZED: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"type": "run", "agent": "claude", "prompt": "p"},
     {"type": "run", "agent": "claude", "command": None, "prompt": "p", "cwd": None,
      "env": {}, "timeout": 1800.0, "overlap": "skip"}),
    ({"type": "run", "command": ["bot", "{prompt}"], "prompt": "p", "cwd": "~/x",
      "env": {"A": "1"}, "timeout": "5m", "overlap": "queue"},
     {"type": "run", "agent": None, "command": ["bot", "{prompt}"], "prompt": "p",
      "cwd": "~/x", "env": {"A": "1"}, "timeout": 300.0, "overlap": "queue"}),
    ({"type": "routine", "routine": "deploy"},
     {"type": "routine", "routine": "deploy", "prompt": "{{ event }}"}),
    ({"type": "notify"},
     {"type": "notify", "channel": None, "message": "{{ monitor.name }}: {{ event }}"}),
    ({"type": "webhook-out", "url": "https://h/x", "timeout": 3, "maxTime": "1m"},
     {"type": "webhook-out", "url": "https://h/x", "secretEnv": None, "headers": {},
      "timeout": 3.0, "maxAttempts": 5, "maxTime": 60.0}),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALIZED)
def test_normalized_mapping_is_unchanged_and_round_trips(raw: dict[str, Any],
                                                         expected: dict[str, Any]) -> None:
    spec = registry.normalize(raw)
    out = spec.to_json()
    assert out == expected and list(out) == list(expected)
    assert registry.kind(out).to_json(spec) == out
    assert dataclasses.is_dataclass(spec) and spec.type == raw["type"]
    assert registry.from_json(out) == spec and registry.kind(spec) is registry.kind(out)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.type = "x"


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown action type 'page'"):
        registry.normalize({"type": "page"})


def test_descriptions_and_previews() -> None:
    specs = [registry.normalize(raw) for raw, _ in NORMALIZED]
    said = {spec.type + str(i): (spec.describe(), registry.kind(spec).preview(spec))
            for i, spec in enumerate(specs)}
    assert said == {
        "run0": ("run claude", "would run claude with the prompt below"),
        "run1": ("run bot {prompt}", "would run bot {prompt} with the prompt below"),
        "routine2": ("routine deploy", "would fire routine deploy"),
        "notify3": ("notify default channels", "would notify the default channels"),
        "webhook-out4": ("webhook-out https://h/x", "would POST the event JSON to https://h/x"),
    }
    assert [registry.from_json(out).describe() for _, out in NORMALIZED] == [
        s.describe() for s in specs]


def test_deliveries_are_resent_and_runs_never_respawned() -> None:
    assert {t: registry.recovery(t) for t in registry.TYPES} == {
        "run": Recovery.INTERRUPT, "routine": Recovery.INTERRUPT,
        "notify": Recovery.RESEND, "webhook-out": Recovery.RESEND}
    assert registry.recovery("") is Recovery.INTERRUPT


def test_each_type_checks_its_own_references() -> None:
    config = options.parse({})
    found = {kind: module.check(raw, config) for kind, module, raw in (
        ("run", registry.TYPES["run"], {"type": "run", "agent": "cluade", "prompt": "x"}),
        ("routine", registry.TYPES["routine"], {"type": "routine", "routine": "triage"}),
        ("notify", registry.TYPES["notify"], {"type": "notify", "channel": "phone"}),
        ("webhook-out", registry.TYPES["webhook-out"], {"type": "webhook-out", "url": "x"}),
    )}
    assert [f for f, _ in found["run"]] == ["action.agent"]
    assert [f for f, _ in found["routine"]] == ["action.routine"]
    assert [f for f, _ in found["notify"]] == ["action.channel"]
    assert found["webhook-out"] == []


def test_the_run_timeout_default_is_one_constant() -> None:
    run = registry.TYPES["run"]
    assert run.normalize({"type": "run", "agent": "a", "prompt": "p"}).timeout == \
        options.DEFAULT_RUN_TIMEOUT
    routine = registry.TYPES["routine"]
    config = options.parse({"routines": {"r": {"argv": ["true"]}}})
    assert routine.resolve(routine.normalize({"type": "routine", "routine": "r"}),  # type: ignore[attr-defined]
                           config).timeout == options.DEFAULT_RUN_TIMEOUT


def test_each_type_has_an_add_flag_whose_action_normalizes() -> None:
    from reconciler.config.authoring import adddoc

    assert adddoc.ACTION_FLAGS == ("--run", "--routine", "--notify", "--webhook-out")
    values = {"run": "claude", "routine": "deploy", "notify": "", "webhook-out": "https://h/x"}
    for kind, module in registry.TYPES.items():
        prompt = "p" if module.ADD.takes_prompt else None
        action = module.from_flag(values[kind], prompt)
        assert registry.normalize({k: v for k, v in action.items() if v is not None}).type \
            == kind
