"""The per-field diff of a plan: every changed field is shown, and named once in the
reason; the text plan shows durations as durations (JSON keeps seconds); a saved plan
is tied to whether the daemon ran."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from reconciler.model import Monitor, MonitorName
from reconciler.planning import desired as desired_mod
from reconciler.planning import placement
from reconciler.planning import plan as plan_mod
from reconciler.planning import saved as saved_mod
from reconciler.planning.diff import ChangeKind, diff
from reconciler.render import plan as render
from tests.factories import monitor


def mon(name: str = "ci", **extra: Any) -> Monitor:
    doc: dict[str, Any] = {
        "source": {"type": "poll", "command": ["echo", "hi"], "interval": "2s"},
        "condition": {"mode": "match", "match": "fail"},
        "action": {"type": "notify"},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    return monitor(**doc, name=name, origin=f"monitors.d/{name}.yml")


def fields(old: Monitor, new: Monitor) -> list[tuple[str, Any, Any]]:
    [change] = diff({MonitorName(new.name): new}, {MonitorName(old.name): old})
    return [(f.path, f.old, f.new) for f in change.fields]


def test_a_replace_shows_the_label_changed_with_the_condition() -> None:
    old = mon(labels={"team": "ci"})
    new = mon(condition={"match": "fail|error"}, labels={"team": "infra"})
    [change] = diff({MonitorName("ci"): new}, {MonitorName("ci"): old})
    assert change.action is ChangeKind.REPLACE
    # was only [("condition.match", ...)]: the label change was missing
    assert [(f.path, f.old, f.new) for f in change.fields] == [
        ("condition.match", "fail", "fail|error"), ("labels.team", "ci", "infra")]
    assert [f["field"] for f in change.to_json()["fields"]] == ["condition.match",
                                                                 "labels.team"]


def test_a_replace_shows_description_rate_limit_and_placement() -> None:
    old = mon()
    new = mon(source={"command": ["echo", "other"]}, description="d",
              rateLimit={"max": 3, "per": "1m"}, device="box-2", labels={"team": "ci"})
    assert fields(old, new) == [
        ("description", "", "d"),
        ("device", None, "box-2"),
        ("labels.team", None, "ci"),  # not also "labels: {} -> null"
        ("rateLimit.max", None, 3),
        ("rateLimit.per", None, 60.0),
        ("source.command", ["echo", "hi"], ["echo", "other"]),
    ]


def test_an_update_shows_labels_added_to_none() -> None:
    assert fields(mon(), mon(labels={"team": "ci"})) == [("labels.team", None, "ci")]


def _plan(old: Monitor, new: Monitor) -> plan_mod.Plan:
    def here(m: Monitor) -> placement.Placement:
        return placement.Placement(True, "me", "here")

    desired = desired_mod.desired_set({MonitorName(new.name): new}, owner=here)
    return plan_mod.make(desired, {MonitorName(old.name): old},
                         plan_mod.Basis(device="me", daemon_running=True, generation=3,
                                        digest="sha256:x"))


def test_text_plan_shows_durations_and_json_keeps_seconds() -> None:
    old = mon(action={"type": "webhook-out", "url": "http://127.0.0.1:1/x"},
              rateLimit={"max": 3, "per": "90s"})
    new = mon(source={"interval": "3s", "timeout": "1500ms"},
              action={"type": "webhook-out", "url": "http://127.0.0.1:1/x", "timeout": "1m",
                      "maxTime": "2h"},
              rateLimit={"max": 3, "per": "1h"})
    plan = _plan(old, new)
    text = render.text(plan)
    assert "~ source.interval: 2s -> 3s" in text  # was "2.0 -> 3.0"
    assert "~ source.timeout: 2s -> 1500ms" in text
    assert "~ action.timeout: " in text and " -> 1m" in text
    assert " -> 2h" in text
    assert "~ rateLimit.per: 90s -> 1h" in text
    assert ".0 ->" not in text
    doc = json.loads(render.as_json(plan))
    [change] = doc["changes"]
    assert {"field": "source.interval", "old": 2.0, "new": 3.0} in change["fields"]
    assert {"field": "rateLimit.per", "old": 90.0, "new": 3600.0} in change["fields"]


def test_a_saved_plan_is_stale_when_the_daemon_stopped_since() -> None:
    old = mon()
    made = replace(_plan(old, old), daemon_pid=4242)  # made while a daemon ran
    saved = saved_mod.SavedPlan.from_json(made.to_json())
    assert saved_mod.stale_reasons(saved, made) == []
    now = replace(made, daemon_running=False, daemon_pid=None)
    assert saved_mod.stale_reasons(saved, now) == [
        "the daemon was running when the plan was made (pid 4242) and is not now"]
    restarted = replace(made, daemon_pid=4343)
    assert saved_mod.stale_reasons(saved, restarted) == [
        "the daemon was restarted since the plan was made (pid 4242, now 4343)"]
    unsaved = saved_mod.SavedPlan.from_json(now.to_json())
    assert saved_mod.stale_reasons(unsaved, made) == [
        "the daemon was not running when the plan was made and is now (pid 4242)"]
    legacy = {k: v for k, v in made.to_json().items() if k != "daemon"}
    assert saved_mod.stale_reasons(saved_mod.SavedPlan.from_json(legacy), now) == []


def test_update_reason_names_each_changed_field_once() -> None:
    old = monitor(name="repo-head", rateLimit={"max": 5, "per": "1m"}, labels={"a": "1"})
    new = monitor(name="repo-head", rateLimit={"max": 9, "per": "2m"}, labels={"a": "2"})
    [change] = diff({old.name: new}, {old.name: old})
    assert change.action is ChangeKind.UPDATE
    # was "labels, rateLimit, rateLimit changed": rateLimit.max and rateLimit.per
    assert change.reason == "labels, rateLimit changed: updated in place, baseline kept"
    assert [f.path for f in change.fields] == ["labels.a", "rateLimit.max", "rateLimit.per"]
