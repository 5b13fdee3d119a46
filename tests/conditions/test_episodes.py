"""Thresholds and hysteresis (``fireAfter``, ``resolveAfter``, ``resolve``): table tests of
the pure episode logic, in the style of ``promtool test rules``, and the same cases
through ``monitors test --replay``'s runner."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import conditions
from reconciler.conditions import replay
from reconciler.model import Observation
from tests.factories import monitor


def run(checks: str, **condition: Any) -> list[str]:
    """Feed ``checks`` (``f`` a failing check, ``o`` a good one, space-separated words
    allowed) through ``match: fail`` with ``condition``; return per check ``FIRE``,
    ``RESOLVED`` or ``-``, persisting state exactly as the engine does."""
    m = monitor(condition={"mode": "match", "match": "fail", **condition})
    state: dict[str, Any] | None = None
    out = []
    for c in checks.replace(" ", ""):
        d = conditions.decide(m, Observation("fail" if c == "f" else "ok"), state)
        if d.persist:
            state = d.state
        out.append("-" if not d.fire else "RESOLVED" if d.reason == "resolved" else "FIRE")
    return out


@pytest.mark.parametrize(("checks", "condition", "fires_at"), [
    # the issue's cases: fail ok ok fail fail
    ("foo ff", {"fireAfter": {"count": 3, "within": 5}}, [5]),
    ("foo ff", {"fireAfter": {"consecutive": 3}}, []),
    # a window not yet full counts the checks there are
    ("fff", {"fireAfter": {"count": 3, "within": 5}}, [3]),
    ("ff", {"fireAfter": {"count": 3, "within": 5}}, []),
    # old hits leave the window: f then five oks then f f is only 2 of the last 5
    ("f oooo ff", {"fireAfter": {"count": 3, "within": 5}}, []),
    ("fff", {"fireAfter": {"consecutive": 3}}, [3]),
    # one episode fires once, however long it lasts
    ("ffffff", {"fireAfter": {"consecutive": 2}}, [2]),
    # closes on the first ok by default; a new episode needs the threshold again
    ("ff o f ff", {"fireAfter": {"consecutive": 2}}, [2, 5]),
    # resolveAfter: a single ok inside an episode does not close it
    ("ff o ff oo ff", {"fireAfter": {"consecutive": 2}, "resolveAfter": {"consecutive": 2}},
     [2, 9]),
])
def test_fire_after(checks: str, condition: dict[str, Any], fires_at: list[int]) -> None:
    got = run(checks, **condition)
    assert [i for i, r in enumerate(got, start=1) if r == "FIRE"] == fires_at


@pytest.mark.parametrize(("checks", "condition", "expected"), [
    ("f o", {"resolve": True}, ["FIRE", "RESOLVED"]),
    ("ff oo o", {"fireAfter": {"consecutive": 2}, "resolveAfter": {"consecutive": 2},
                 "resolve": True}, ["-", "FIRE", "-", "RESOLVED", "-"]),
    ("f o", {"resolveAfter": {"consecutive": 1}}, ["FIRE", "-"]),
    # a flap shorter than resolveAfter neither resolves nor fires again
    ("f o f o o", {"resolveAfter": {"consecutive": 2}, "resolve": True},
     ["FIRE", "-", "-", "-", "RESOLVED"]),
    # nothing to resolve while no episode is open
    ("o o f", {"fireAfter": {"consecutive": 2}, "resolve": True}, ["-", "-", "-"]),
])
def test_resolve(checks: str, condition: dict[str, Any], expected: list[str]) -> None:
    assert run(checks, **condition) == expected


def test_a_healthy_monitor_never_rewrites_its_state() -> None:
    m = monitor(condition={"mode": "match", "match": "fail",
                           "fireAfter": {"count": 2, "within": 5}, "resolve": True})
    first = conditions.decide(m, Observation("ok"), None)
    again = conditions.decide(m, Observation("ok"), first.state)
    assert not again.persist and not again.fire


def test_resolved_event_carries_the_signature_the_episode_opened_with() -> None:
    m = monitor(condition={"mode": "match", "match": r"fail \d+", "resolve": True})
    opened = conditions.decide(m, Observation("fail 7"), None)
    closed = conditions.decide(m, Observation("ok"), opened.state)
    assert (closed.fire, str(closed.reason), closed.signature) == (True, "resolved", "fail 7")


def test_the_episode_survives_a_restart_through_the_stored_state() -> None:
    m = monitor(condition={"mode": "match", "match": "fail",
                           "fireAfter": {"consecutive": 3}})
    d1 = conditions.decide(m, Observation("fail"), None)
    d2 = conditions.decide(m, Observation("fail"), d1.state)
    stored = dict(d2.state)  # what state.json holds when the daemon restarts
    d3 = conditions.decide(m, Observation("fail"), stored)
    assert (d1.fire, d2.fire, d3.fire) == (False, False, True)
    assert str(d2.reason) == "pending"


def test_replay_reports_pending_and_resolved() -> None:
    m = monitor(condition={"mode": "match", "match": "fail",
                           "fireAfter": {"count": 3, "within": 5}, "resolve": True})
    steps = replay.parse([
        {"text": "fail", "reason": "pending", "fire": False},
        "ok", "ok",
        {"text": "fail", "fire": False},
        {"text": "fail", "fire": True, "reason": "matched new signature"},
        {"text": "ok", "fire": True, "reason": "resolved"},
    ], file="r.yml")
    results = replay.replay(m, steps)
    assert [r.mismatch for r in results] == [None] * 6


def test_replay_errors_count_toward_a_threshold_under_on_error_observe() -> None:
    m = monitor({"type": "poll-http", "url": "http://127.0.0.1:9/", "interval": "1m"},
                condition={"mode": "match", "match": "^error: ",
                           "fireAfter": {"consecutive": 2}, "resolve": True})
    steps = replay.parse(["200\nok", {"error": "connect: refused"},
                          {"error": "timeout: no response"}, "200\nok"], file="r.yml")
    got = [(r.fire, r.reason) for r in replay.replay(m, steps, on_error="observe")]
    assert got == [(False, "no match"), (False, "pending"),
                   (True, "matched new signature"), (True, "resolved")]
