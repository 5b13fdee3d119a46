"""Conditions as tables: observation sequences in, fires and reasons out."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import conditions
from reconciler.model import Monitor, Observation
from tests.factories import monitor

SRC = {"type": "poll", "command": "true", "interval": "30s"}


def run(m: Monitor, texts: list[str], state: dict[str, Any] | None = None
        ) -> tuple[list[str], dict[str, Any] | None]:
    """Feed texts through decide, persisting like the engine; return 'F:reason'/'-:reason'."""
    out = []
    for text in texts:
        d = conditions.decide(m, Observation(text), state)
        out.append(("F:" if d.fire else "-:") + d.reason)
        if d.persist:
            state = d.state
    return out, state


CASES: list[tuple[str, dict[str, Any] | None, list[str], list[str]]] = [
    ("on-change baseline then change", None, ["a", "a", "b", "b", "a"],
     ["-:baseline", "-:unchanged", "F:changed", "-:unchanged", "F:changed"]),
    ("match fail pass fail fires twice", {"mode": "match", "match": "fail"},
     ["fail", "pass", "fail"],
     ["F:matched new signature", "-:no match", "F:matched new signature"]),
    ("match once per signature while matching", {"mode": "match", "match": "fail"},
     ["ok", "fail 1", "fail 1", "fail 2", "fail 2"],
     ["-:no match", "F:matched new signature", "-:unchanged", "F:matched new signature",
      "-:unchanged"]),
    ("dedupeKey group 1", {"mode": "match", "match": "fail", "dedupeKey": r"build (\d+)"},
     ["fail build 7 at 10:00", "fail build 7 at 10:05", "fail build 8 at 10:06"],
     ["F:matched new signature", "-:unchanged", "F:matched new signature"]),
    ("dedupeKey without groups uses the whole match", {"dedupeKey": r"v\d+"},
     ["release v1 (built 1)", "release v1 (built 2)", "release v2"],
     ["-:baseline", "-:unchanged", "F:changed"]),
    ("ignore removes volatile parts", {"ignore": [r"\d\d:\d\d:\d\d", r"nonce=\w+"]},
     ["up 10:00:00 nonce=abc", "up 10:00:05 nonce=def", "down 10:00:10 nonce=x"],
     ["-:baseline", "-:unchanged", "F:changed"]),
    ("every fires each time", {"mode": "every"}, ["a", "a", "b"],
     ["F:every", "F:every", "F:every"]),
    ("pid default: exited fires once", None, ["running", "running", "exited", "exited"],
     ["-:no match", "-:no match", "F:matched new signature", "-:unchanged"]),
]


@pytest.mark.parametrize(("title", "cond", "texts", "expected"), CASES, ids=[c[0] for c in CASES])
def test_condition_table(title: str, cond: dict[str, Any] | None, texts: list[str],
                         expected: list[str]) -> None:
    src = {"type": "pid", "pid": 1} if title.startswith("pid") else SRC
    m = monitor(src, condition=cond)
    assert run(m, texts)[0] == expected


def test_a_change_of_what_is_observed_starts_a_new_baseline() -> None:
    old = monitor(SRC)
    _, state = run(old, ["a"])
    new = monitor({**SRC, "command": "echo"})
    assert new.fingerprint != old.fingerprint
    d = conditions.decide(new, Observation("b"), state)
    assert not d.fire and d.reason == conditions.Reason.BASELINE and d.persist
    assert d.state["fingerprint"] == new.fingerprint


def test_identity_change_in_match_mode_does_not_inherit_episode() -> None:
    old = monitor(SRC, condition={"mode": "match", "match": "fail"})
    _, state = run(old, ["fail"])
    new = monitor({**SRC, "command": "echo"}, condition={"mode": "match", "match": "fail"})
    d = conditions.decide(new, Observation("fail"), state)
    assert d.fire and d.persist


def test_summary_signature_groups_and_observation_after_ignore() -> None:
    m = monitor(SRC, condition={"mode": "match", "match": r"fail(ed)? in (\w+)",
                                "ignore": [r"@\d+"]})
    d = conditions.decide(m, Observation("job failed in lint @123"), None)
    assert d.summary == "failed in lint"
    assert d.groups == ("ed", "lint")
    assert d.observation == "job failed in lint "


def test_long_observation_signature_is_hashed_and_summary_shortened() -> None:
    m = monitor(SRC)
    d = conditions.decide(m, Observation("x" * 5000), None)
    assert d.signature.startswith("sha256:") and len(d.signature) == 71
    assert len(d.summary) == 1000 and d.summary.endswith("…")


def test_unchanged_does_not_persist() -> None:
    m = monitor(SRC)
    _, state = run(m, ["a"])
    d = conditions.decide(m, Observation("a"), state)
    assert not d.persist and not d.fire


def test_registry_has_one_module_per_mode() -> None:
    from reconciler.conditions import registry
    from reconciler.model import ConditionMode

    assert list(registry.MODES) == [m.value for m in ConditionMode]
    for key, module in registry.MODES.items():
        assert key == module.MODE


@pytest.mark.parametrize(("raw", "source_type", "expected"), [
    (None, "poll", {"mode": "on-change", "match": None, "dedupeKey": None, "ignore": []}),
    (None, "pid", {"mode": "match", "match": "^exited$", "dedupeKey": None, "ignore": []}),
    ({"mode": "match", "match": "fail", "dedupeKey": "b(\\d)", "ignore": ["x", "y"]}, "poll",
     {"mode": "match", "match": "fail", "dedupeKey": "b(\\d)", "ignore": ["x", "y"]}),
    ({"mode": "every"}, "pid", {"mode": "every", "match": None, "dedupeKey": None, "ignore": []}),
    ({"onError": "observe"}, "poll", {"mode": "on-change", "match": None, "dedupeKey": None,
                                      "ignore": [], "onError": "observe"}),
])
def test_to_json_is_the_normalized_mapping_the_fingerprint_hashes(
        raw: dict[str, Any] | None, source_type: str, expected: dict[str, Any]) -> None:
    from reconciler.conditions import spec

    got = spec.to_json(spec.normalize(raw, source_type=source_type))
    # keys in KEYS order; the optional ones only when set (fingerprints stay put)
    assert got == expected
    assert list(got) == [k for k in spec.KEYS if k not in spec.OPTIONAL_KEYS or k in got]
    # the running registry stores to_json and rebuilds the spec from it
    assert spec.normalize(got, source_type="pid") == spec.normalize(raw, source_type=source_type)


@pytest.mark.parametrize(("cond", "expected"), [
    (None, "on-change"), ({"mode": "every"}, "every"),
    ({"mode": "match", "match": "fail|error"}, "match /fail|error/"),
])
def test_describe_comes_from_the_mode_module(cond: dict[str, Any] | None, expected: str) -> None:
    from reconciler.conditions import registry

    assert registry.describe(monitor(SRC, condition=cond).condition) == expected


def test_check_reports_regexes_then_the_modes_own_findings() -> None:
    from reconciler.conditions import registry

    found = registry.check({"mode": "match", "match": "ok|passed", "ignore": ["(", 3]})
    assert [(f.path, f.rule, f.severity.value) for f in found] == [
        (("condition", "ignore", 0), "bad-regex", "error"),
        (("condition", "match"), "coverage", "warning")]
    assert registry.check({"mode": "bogus", "match": "("})[0].rule == "bad-regex"


def test_each_mode_has_an_add_flag_whose_condition_normalizes_to_it() -> None:
    from reconciler.conditions import registry, spec

    flags = registry.add_flags()
    assert [f.flag for f in flags] == ["--on-change", "--match", "--every", "--dedupe-key"]
    for mode, module in registry.MODES.items():
        value = "x" if module.ADD.metavar else True
        written = registry.from_flags({module.ADD.dest: value}, source_type="pid")
        assert spec.normalize(written, source_type="pid").mode == mode


ADD_CASES: list[tuple[dict[str, Any], str, dict[str, Any] | None]] = [
    ({}, "poll", None),
    ({"on_change": True}, "poll", None),  # the default stays implicit
    ({"on_change": True}, "pid", {"mode": "on-change"}),  # not pid's default (exit)
    ({"on_change": True, "dedupe_key": "k"}, "poll", {"dedupeKey": "k"}),
    ({"on_change": False, "match": "", "every": False}, "poll", {"mode": "match", "match": ""}),
    ({"every": True, "dedupe_key": r"id=(\d+)"}, "poll",
     {"mode": "every", "dedupeKey": r"id=(\d+)"}),
]


@pytest.mark.parametrize(("given", "source_type", "expected"), ADD_CASES)
def test_add_flags_write_the_condition(given: dict[str, Any], source_type: str,
                                        expected: dict[str, Any] | None) -> None:
    from reconciler.conditions import registry

    assert registry.from_flags(given, source_type=source_type) == expected


@pytest.mark.parametrize(("given", "message"), [
    ({"on_change": True, "match": "x", "every": True},
     "add: give at most one condition; got --on-change, --match, --every"),
    ({"match": "(", "dedupe_key": "("}, "--match: invalid regex '('"),
    ({"dedupe_key": "["}, "--dedupe-key: invalid regex '['"),
])
def test_add_flags_refuse_two_modes_and_bad_regexes(given: dict[str, Any], message: str) -> None:
    from reconciler import errors
    from reconciler.conditions import registry

    with pytest.raises(errors.UsageError) as e:
        registry.from_flags(given, source_type="poll")
    assert str(e.value).startswith(message)
