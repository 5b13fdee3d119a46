"""Watchers that end themselves: the pure rule (``conditions.lifecycle``), its lint checks,
the completion key, and ``monitors add --until/--stop-after/--stop-when``."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from reconciler import errors
from reconciler.conditions import lifecycle
from reconciler.config.authoring import adddoc
from tests.factories import monitor

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC).timestamp()


def spec(**doc: Any) -> lifecycle.Lifecycle:
    found = lifecycle.normalize(doc)
    assert found is not None
    return found


@pytest.mark.parametrize(("doc", "fires", "now", "text", "expected"), [
    ({"stopWhen": "merged|closed"}, 0, T0, "state: merged", "stopWhen matched 'merged'"),
    ({"stopWhen": "merged|closed"}, 0, T0, "state: open", None),
    ({"stopAfter": {"fires": 2}}, 1, T0, "x", None),
    ({"stopAfter": {"fires": 2}}, 2, T0, "x", "stopAfter: 2 fires"),
    ({"until": "2026-12-01T10:00:00Z"}, 0, T0 + 9 * 3600, "x", None),
    ({"until": "2026-12-01T10:00:00Z"}, 0, T0 + 10 * 3600, None,
     "until 2026-12-01T10:00:00Z"),
    ({"until": "2026-12-02"}, 0, T0 + 86400, None, "until 2026-12-02T00:00:00Z"),
    # a duration counts from the first start (T0 here)
    ({"until": "3d"}, 0, T0 + 2 * 86400, None, None),
    ({"until": "3d"}, 0, T0 + 3 * 86400, None, "until 2026-12-04T00:00:00Z"),
])
def test_outcome(doc: dict[str, Any], fires: int, now: float, text: str | None,
                 expected: str | None) -> None:
    got = lifecycle.outcome(spec(**doc), lifecycle.Progress(T0, fires), now=now,
                            observation=text)
    assert got == expected


def test_no_end_conditions_is_none() -> None:
    assert lifecycle.normalize({"source": {}}) is None
    assert monitor().lifecycle is None


@pytest.mark.parametrize(("doc", "rule"), [
    ({"until": "next tuesday"}, "bad-until"),
    ({"until": "2026-12-01T10:00:00"}, "bad-until"),  # no time zone
    ({"stopWhen": "merged("}, "bad-regex"),
])
def test_lint(doc: dict[str, Any], rule: str) -> None:
    [finding] = lifecycle.check(doc)
    assert finding.rule == rule


def test_the_key_follows_the_fingerprint_and_the_end_conditions() -> None:
    base = monitor(stopWhen="merged")
    assert lifecycle.key(base) == lifecycle.key(monitor(stopWhen="merged", labels={"a": "b"}))
    assert lifecycle.key(base) != lifecycle.key(monitor(stopWhen="merged|closed"))
    assert lifecycle.key(base) != lifecycle.key(
        monitor({"type": "poll", "command": ["false"], "interval": "30s"}, stopWhen="merged"))


def test_add_writes_the_fields() -> None:
    req = adddoc.AddRequest(name="pr-42", sources={"poll": ("gh pr view 42", "5m")},
                            notify="", until="7d", stop_after=1, stop_when="merged|closed")
    doc = adddoc.build_doc(req)
    assert (doc["until"], doc["stopAfter"], doc["stopWhen"]) == (
        "7d", {"fires": 1}, "merged|closed")
    assert list(doc).index("until") == list(doc).index("action") + 1


@pytest.mark.parametrize(("flags", "message"), [
    ({"until": "soon"}, "--until: 'soon' is neither"),
    ({"stop_after": 0}, "--stop-after: expected a number of fires >= 1"),
    ({"stop_when": "("}, "--stop-when: invalid regex"),
])
def test_add_refuses_bad_values(flags: dict[str, Any], message: str) -> None:
    req = adddoc.AddRequest(name="pr-42", sources={"poll": ("gh pr view 42", "5m")},
                            notify="", **flags)
    with pytest.raises(errors.UsageError, match=message.replace("(", r"\(")):
        adddoc.build_doc(req)


def test_replay_completes_with_stop_when_and_stop_after() -> None:
    from reconciler.conditions import replay

    m = monitor(stopWhen="merged", condition={"mode": "every"})
    steps = replay.parse(["open", {"text": "merged", "fire": True},
                          {"text": "open", "reason": "completed", "fire": False}], file="r")
    results = replay.replay(m, steps)
    assert [r.mismatch for r in results] == [None, None, None]
    assert results[1].completed == "stopWhen matched 'merged'"

    m = monitor(stopAfter={"fires": 2})
    results = replay.replay(m, replay.parse(["a", "b", "c", "d"], file="r"))
    assert [(r.fire, r.reason) for r in results] == [
        (False, "baseline"), (True, "changed"), (True, "changed"), (False, "completed")]
    assert results[2].completed == "stopAfter: 2 fires"
