"""Events carry what changed: the previous observation kept in the condition state, a
bounded unified diff, and its first changed line (``monitors runs``)."""

from __future__ import annotations

from reconciler import conditions
from reconciler.conditions import diff
from reconciler.daemon.polls import make_event
from reconciler.model import Observation
from reconciler.render import monitors as render
from tests.factories import monitor


def test_unified_diff_with_one_line_of_context() -> None:
    got = diff.unified("a\nb\nc\nd", "a\nb\nC\nd")
    assert got == "--- previous\n+++ current\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d"
    assert diff.first_change(got) == "-c"
    assert diff.unified(None, "x") == "" and diff.unified("x", "x") == ""


def test_the_diff_is_bounded() -> None:
    got = diff.unified("\n".join(f"old {i}" for i in range(2000)),
                       "\n".join(f"new {i}" for i in range(2000)))
    assert len(got) <= diff.DIFF_CHARS + 40
    assert got.endswith("more diff lines)")


def test_events_carry_previous_current_and_diff() -> None:
    m = monitor()
    base = conditions.decide(m, Observation("v1\nsame"), None)
    assert base.previous is None and base.state["lastObservation"] == "v1\nsame"
    changed = conditions.decide(m, Observation("v2\nsame"), base.state)
    event = make_event(m, changed, Observation("v2\nsame"), at=1_750_000_000.0)
    body = event.to_json()
    assert (body["previous"], body["current"]) == ("v1\nsame", "v2\nsame")
    assert body["diff"] == "--- previous\n+++ current\n@@ -1,2 +1,2 @@\n-v1\n+v2\n same"
    # runs shows the first changed line under the fire
    line = render.fire_line({"id": "x", "status": "succeeded", "event": body})
    assert line.splitlines()[1] == "    -v1"


def test_an_unchanged_poll_does_not_touch_the_state() -> None:
    m = monitor()
    base = conditions.decide(m, Observation("v1"), None)
    again = conditions.decide(m, Observation("v1"), base.state)
    assert not again.persist and again.previous is None


def test_an_episode_fire_diffs_against_the_check_before_it_began() -> None:
    # fireAfter: the pending check stored its own observation, so the fire that opened
    # an outage had previous == current and an empty diff. (The very first outage has
    # no stored good check to diff against: match mode stores no plain miss.)
    m = monitor(condition={"mode": "match", "match": "^error: ", "resolve": True,
                           "fireAfter": {"consecutive": 2},
                           "resolveAfter": {"consecutive": 2}})
    state = None
    fired = []
    down, up = "error: connect: refused", "200 ok"
    for text in (up, down, down, up, up, up, down, down, up, up):
        d = conditions.decide(m, Observation(text), state)
        if d.persist:
            state = d.state
        if d.fire:
            fired.append((str(d.reason), d.previous, text))
    assert fired == [("matched new signature", down, down),  # the first: nothing before
                     ("resolved", down, up),
                     ("matched new signature", up, down),  # was (down, down): no diff
                     ("resolved", down, up)]
