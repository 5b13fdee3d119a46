"""Baselines follow what is observed: which edits keep the condition state (and the
signatures fired) and which start a new baseline, from the state (``decide``) and from
two monitors (the plan's ``verdict``)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import conditions
from reconciler.conditions import baseline
from reconciler.model import Monitor, Observation
from tests.factories import monitor

SRC = {"type": "poll", "command": "make test", "interval": "30s"}
MATCH = {"mode": "match", "match": "fail", "dedupeKey": r"build (\d+)"}


def _state(m: Monitor, texts: list[str]) -> dict[str, Any] | None:
    state: dict[str, Any] | None = None
    for text in texts:
        d = conditions.decide(m, Observation(text), state)
        if d.persist:
            state = d.state
    return state


@pytest.mark.parametrize(("edit", "kept"), [
    ({"source": {**SRC, "interval": "1h"}}, True),
    ({"source": {**SRC, "timeout": "5s"}}, True),
    ({"action": {"type": "notify", "message": "{{ event }}!"}}, True),
    ({"rateLimit": {"max": 1, "per": "1h"}, "labels": {"team": "ci"}}, True),
    ({"condition": {**MATCH, "fireAfter": {"consecutive": 1}}}, True),
    ({"source": {**SRC, "command": "make check"}}, False),
    ({"source": {**SRC, "select": "state"}}, False),
    ({"condition": {**MATCH, "ignore": ["x"]}}, False),
])
def test_which_edits_keep_the_baseline(edit: dict[str, Any], kept: bool) -> None:
    """A failure still present after the edit fires again only when the baseline is new."""
    old = monitor(SRC, condition=MATCH)
    state = _state(old, ["ok", "fail build 7"])
    new = monitor(**{"source": SRC, "condition": MATCH, **edit})
    d = conditions.decide(new, Observation("fail build 7"), state)
    assert d.fire is not kept
    assert d.state["fingerprint"] == new.fingerprint
    if new.fingerprint != old.fingerprint:  # rateLimit and labels are not in it
        assert d.persist
        assert baseline.verdict(old, new).kept is kept


@pytest.mark.parametrize("condition", [
    {**MATCH, "match": "fail|error"},
    {**MATCH, "dedupeKey": r"build (\d+)\b"},
])
def test_match_or_dedupe_key_edits_keep_the_signatures_fired_in_the_episode(
        condition: dict[str, Any]) -> None:
    old = monitor(SRC, condition=MATCH)
    state = _state(old, ["fail build 7"])
    new = monitor(SRC, condition=condition)
    assert not conditions.decide(new, Observation("fail build 7"), state).fire
    assert conditions.decide(new, Observation("fail build 8"), state).fire
    why = baseline.verdict(old, new).why
    assert why.startswith("new baseline (condition.") and "fired in the current episode" in why


def test_on_change_dedupe_key_edit_starts_a_new_baseline() -> None:
    old = monitor(SRC, condition={"dedupeKey": "v(\\d+)"})
    state = _state(old, ["v1"])
    new = monitor(SRC, condition={"dedupeKey": "(v\\d+)"})
    d = conditions.decide(new, Observation("v1"), state)
    assert (d.fire, str(d.reason)) == (False, "baseline")


def test_a_state_without_the_digests_starts_a_new_baseline() -> None:
    old = monitor(SRC)
    state = _state(old, ["a"])
    assert state is not None
    legacy = {k: v for k, v in state.items() if k not in (baseline.OBSERVES, baseline.SIGNS)}
    d = conditions.decide(monitor({**SRC, "interval": "1h"}), Observation("b"), legacy)
    assert str(d.reason) == "baseline"


def test_the_verdict_names_the_fields() -> None:
    old = monitor({**SRC, "timeout": "10s"})
    assert baseline.verdict(old, monitor({**SRC, "timeout": "10s", "interval": "1h"})).why == \
        "baseline kept (source.interval changed)"
    assert baseline.verdict(old, monitor({**SRC, "timeout": "10s", "command": "x"})).why == \
        "new baseline (source.command changed: what is observed)"
