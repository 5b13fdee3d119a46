"""Schema and semantic cases per field: a valid and an invalid value for each."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from reconciler.config import schemas, semantic, validate, yamlload

BASE: dict[str, Any] = {
    "source": {"type": "poll", "command": "date", "interval": "30s"},
    "action": {"type": "notify"},
}

SOURCES = {
    "poll": {"type": "poll", "command": ["date", "-u"], "interval": 60, "timeout": "5s",
             "cwd": "/tmp", "env": {"A": "b"}, "maxBytes": 1024},
    "command": {"type": "command", "command": "tail -F x", "backoff": "2s", "env": {},
                "cwd": "/", "maxBytes": 10},
    "poll-http": {"type": "poll-http", "url": "https://example.com", "interval": "1m",
                  "timeout": "3s", "headers": {"X": "v"}, "followRedirects": True,
                  "maxBytes": 100},
    "file": {"type": "file", "path": "/etc/hostname", "interval": "10s", "timeout": "1s",
             "maxBytes": 1},
    "pid": {"type": "pid", "pid": 1, "interval": "5s", "force": True},
    "device": {"type": "device", "device": "box-1", "interval": "1m", "timeout": "5s"},
    "ws": {"type": "ws", "url": "wss://example.com/feed", "headers": {"A": "b"}},
    "webhook": {"type": "webhook", "provider": "linear", "events": ["Issue"],
                "secretEnv": "LINEAR_SECRET"},
}
ACTIONS = {
    "run": {"type": "run", "agent": "claude", "command": ["echo", "{prompt}"], "prompt": "x",
            "cwd": "~", "env": {"A": "b"}, "timeout": "30m", "overlap": "queue"},
    "routine": {"type": "routine", "routine": "triage", "prompt": "{event}"},
    "notify": {"type": "notify", "channel": "ops", "message": "{{ monitor.name }}: {{ event }}"},
    "webhook-out": {"type": "webhook-out", "url": "http://127.0.0.1:9/x", "secretEnv": "S",
                    "headers": {"A": "b"}, "timeout": "10s", "maxAttempts": 20,
                    "maxTime": "2m"},
}


def check(doc: dict[str, Any], stem: str = "m") -> list[tuple[str, str]]:
    text = yaml.safe_dump(doc, sort_keys=False)
    parsed, problems = yamlload.parse(text.encode(), file=f"{stem}.yml")
    assert parsed is not None, problems
    found = problems + validate.check(parsed)
    if not found:
        found += semantic.check(parsed, stem=stem)
    return [(p.field, p.rule) for p in found]


def with_(**changes: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    for key, value in changes.items():
        parts = key.split("__")
        target = doc
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        if value is _DELETE:
            target.pop(parts[-1], None)
        else:
            target[parts[-1]] = value
    return doc


class _Delete:
    """The value that removes a field; its text is stable so test ids are the same in every
    process (pytest-xdist workers must collect the same ids)."""

    def __repr__(self) -> str:
        return "<delete>"


_DELETE = _Delete()


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_every_source_type_with_all_fields_is_valid(kind: str) -> None:
    found = check({"source": SOURCES[kind], "action": {"type": "notify"}})
    assert found == []


@pytest.mark.parametrize("kind", sorted(ACTIONS))
def test_every_action_type_with_all_fields_is_valid(kind: str) -> None:
    assert check({"source": BASE["source"], "action": ACTIONS[kind]}) == []


VALID = [
    {"apiVersion": "monitors/v1"},
    {"name": "m"},
    {"description": "text"},
    {"enabled": False},
    {"device": "build-box-1"},
    {"devices": ["a", "b.c"]},
    {"sharedInput": True},
    {"rateLimit": {"max": 1, "per": "1m"}},
    {"labels": {"team": "ci", "k8s.io/x": "z"}},
    {"allowDuplicate": True},
    {"condition": {"mode": "every"}},
    {"condition": {"mode": "on-change", "dedupeKey": "id=(\\d+)", "ignore": ["\\d+:\\d+"]}},
    {"condition": {"mode": "match", "match": "fail|error"}},
    {"source__interval": "500ms"},
    {"source__interval": "7d"},
    {"source__interval": "1h30m"},
    {"source__interval": 45},
]


@pytest.mark.parametrize("changes", VALID, ids=lambda c: json.dumps(c))
def test_valid_fields(changes: dict[str, Any]) -> None:
    assert check(with_(**changes)) == []


INVALID = [
    ({"apiVersion": "monitors/v2"}, "apiVersion", "schema"),
    ({"name": "Bad_Name"}, "name", "schema"),
    ({"name": "x" * 64}, "name", "schema"),
    ({"name": "other"}, "name", "name-mismatch"),
    ({"description": 5}, "description", "schema"),
    ({"enabled": "maybe"}, "enabled", "schema"),
    ({"device": "bad device"}, "device", "schema"),
    ({"devices": []}, "devices", "schema"),
    ({"devices": ["a", "a"]}, "devices", "schema"),
    ({"device": "a", "devices": ["b"]}, "devices", "schema"),
    ({"sharedInput": "yes please"}, "sharedInput", "schema"),
    ({"rateLimit": {"max": 0, "per": "1m"}}, "rateLimit.max", "schema"),
    ({"rateLimit": {"max": 1}}, "rateLimit.per", "schema"),
    ({"rateLimit": {"max": 1, "per": "soon"}}, "rateLimit.per", "bad-duration"),
    ({"rateLimit": {"max": 1, "per": 0}}, "rateLimit.per", "bad-duration"),
    ({"labels": {"team": 5}}, "labels.team", "schema"),
    ({"labels": {"bad key": "x"}}, "labels.bad key", "schema"),
    ({"allowDuplicate": "no thanks"}, "allowDuplicate", "schema"),
    ({"sorce": {}}, "sorce", "unknown-field"),
    ({"source": _DELETE}, "source", "schema"),
    ({"action": _DELETE}, "action", "schema"),
    ({"source__type": "cron"}, "source.type", "schema"),
    ({"source__command": _DELETE}, "source.command", "schema"),
    ({"source__command": ""}, "source.command", "schema"),
    ({"source__command": []}, "source.command", "schema"),
    ({"source__interval": "5 minutes"}, "source.interval", "bad-duration"),
    ({"source__interval": "100ms"}, "source.interval", "interval-range"),
    ({"source__interval": "8d"}, "source.interval", "interval-range"),
    ({"source__interval": 0}, "source.interval", "interval-range"),
    ({"source__interval": 1.5}, "source.interval", "bad-duration"),
    ({"source__timeout": "x"}, "source.timeout", "bad-duration"),
    ({"source__maxBytes": 0}, "source.maxBytes", "schema"),
    ({"source__env": {"A": 1}}, "source.env.A", "schema"),
    ({"source__url": "https://x"}, "source.url", "unknown-field"),
    ({"condition": {"mode": "sometimes"}}, "condition.mode", "schema"),
    ({"condition": {"mode": "match"}}, "condition.match", "schema"),
    ({"condition": {"match": "x"}}, "condition.match", "schema"),
    ({"condition": {"mode": "match", "match": "("}}, "condition.match", "bad-regex"),
    ({"condition": {"dedupeKey": "[a-"}}, "condition.dedupeKey", "bad-regex"),
    ({"condition": {"ignore": ["ok", "*x"]}}, "condition.ignore.1", "bad-regex"),
    ({"condition": {"ignore": "x"}}, "condition.ignore", "schema"),
    ({"condition": {"mode": "every", "extra": 1}}, "condition.extra", "unknown-field"),
    ({"action__type": "email"}, "action.type", "schema"),
    ({"source__type": _DELETE}, "source", "schema"),  # one error, not one per source type
    ({"action__type": _DELETE}, "action", "schema"),
    ({"action__chanel": "ops"}, "action.chanel", "unknown-field"),
    ({"action__message": "{{ event"}, "action.message", "bad-template"),
    ({"action__message": "{% for %}"}, "action.message", "bad-template"),
]


@pytest.mark.parametrize(("changes", "field", "rule"), INVALID,
                         ids=lambda c: json.dumps(c, default=str) if isinstance(c, dict) else c)
def test_invalid_fields(changes: dict[str, Any], field: str, rule: str) -> None:
    assert (field, rule) in check(with_(**changes))


@pytest.mark.parametrize(("source", "field"), [
    ({"type": "poll-http", "url": "ftp://x", "interval": "1m"}, "source.url"),
    ({"type": "ws", "url": "https://x"}, "source.url"),
    ({"type": "pid", "pid": 0}, "source.pid"),
    ({"type": "pid", "pid": "123"}, "source.pid"),
    ({"type": "file"}, "source.path"),
    ({"type": "device"}, "source.device"),
    ({"type": "webhook", "provider": "gitlab", "events": ["x"]}, "source.provider"),
    ({"type": "webhook", "provider": "github", "events": []}, "source.events"),
    ({"type": "webhook", "provider": "github", "events": ["x"], "secretEnv": "1BAD"},
     "source.secretEnv"),
])
def test_invalid_source_fields(source: dict[str, Any], field: str) -> None:
    assert (field, "schema") in check({"source": source, "action": {"type": "notify"}})


@pytest.mark.parametrize(("action", "field"), [
    ({"type": "run", "agent": "claude"}, "action.prompt"),
    ({"type": "run", "prompt": "x", "overlap": "always"}, "action.overlap"),
    ({"type": "routine"}, "action.routine"),
    ({"type": "webhook-out"}, "action.url"),
    ({"type": "webhook-out", "url": "http://x", "maxAttempts": 21}, "action.maxAttempts"),
])
def test_invalid_action_fields(action: dict[str, Any], field: str) -> None:
    assert (field, "schema") in check({"source": BASE["source"], "action": action})


def test_unknown_field_suggests_near_miss() -> None:
    parsed, _ = yamlload.parse(b"sorce: {}\nsource: {type: file, path: x}\n"
                               b"action: {type: notify}\n",
                               file="m.yml")
    assert parsed is not None
    [problem] = validate.check(parsed)
    assert "did you mean 'source'" in problem.message
    assert (problem.line, problem.col) == (1, 1)


def test_missing_required_points_at_parent_key_line() -> None:
    parsed, _ = yamlload.parse(b"description: x\nsource:\n  type: poll\n  command: date\n"
                               b"action: {type: notify}\n", file="m.yml")
    assert parsed is not None
    [problem] = validate.check(parsed)
    assert (problem.line, problem.field) == (2, "source.interval")


def test_coverage_warns_on_success_only_match() -> None:
    for match in ("issued", "^(passed|ok)$", "Merged", "ready|done|complete"):
        doc = with_(condition={"mode": "match", "match": match})
        assert ("condition.match", "coverage") in check(doc), match
    for match in ("fail", "passed|failed", "error"):
        doc = with_(condition={"mode": "match", "match": match})
        assert ("condition.match", "coverage") not in check(doc), match


def test_schemas_are_valid_draft_2020_12_and_agree_with_one_engine() -> None:
    for kind in ("monitor", "overlay", "fleet"):
        jsonschema.Draft202012Validator.check_schema(schemas.document(kind))  # type: ignore[arg-type]
    # the engine we use accepts every valid example above
    v = schemas.validator("monitor")
    for kind in SOURCES:
        assert v.is_valid({"source": SOURCES[kind], "action": {"type": "notify"}})


def test_source_type_enum_matches_model() -> None:
    from reconciler.actions import registry
    from reconciler.sources import registry as source_types

    doc = schemas.document("monitor")
    assert set(doc["properties"]["source"]["properties"]["type"]["enum"]) == set(
        source_types.TYPES)
    assert set(doc["properties"]["action"]["properties"]["type"]["enum"]) == {
        *registry.TYPES}


def test_number_where_text_is_expected_says_quote_it() -> None:
    parsed, _ = yamlload.parse(b"source: {type: file, path: x}\naction: {type: notify}\n"
                               b"labels: {tier: 1}\n", file="m.yml")
    assert parsed is not None
    [problem] = validate.check(parsed)
    assert (problem.field, problem.line, problem.col) == ("labels.tier", 3, 16)
    assert problem.message == "expected string, got integer: 1; quote it"


def test_pid_range() -> None:
    assert ("source.pid", "schema") in check(
        {"source": {"type": "pid", "pid": 99999999999999999999}, "action": {"type": "notify"}})


@pytest.mark.parametrize("part", ["source", "action"])
def test_missing_type_is_the_only_problem_of_its_mapping(part: str) -> None:
    doc = copy.deepcopy(BASE)
    del doc[part]["type"]
    assert check(doc) == [(part, "schema")]
