"""The diff and the plan as tables: desired vs running -> changes with reasons (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler import fleet
from reconciler.model import Monitor, MonitorName, Pause, Scope
from reconciler.planning import desired as desired_mod
from reconciler.planning import placement
from reconciler.planning import plan as plan_mod
from reconciler.planning import saved as saved_mod
from reconciler.planning.diff import ChangeKind, diff
from reconciler.state import registry
from tests.factories import monitor


def mon(name: str, *, command: str = "echo hi", interval: str = "30s", match: str | None = None,
        rate: dict[str, Any] | None = None, origin: str | None = None, **extra: Any) -> Monitor:
    if rate is not None:
        extra["rateLimit"] = rate
    return monitor({"type": "poll", "command": command, "interval": interval}, name=name,
                   condition=None if match is None else {"mode": "match", "match": match},
                   origin=origin or f"monitors.d/{name}.yml", **extra)


def N(name: str) -> MonitorName:
    return MonitorName(name)


def by_name(changes: list[Any]) -> dict[str, Any]:
    return {c.name: c for c in changes}


def test_start_stop_unchanged() -> None:
    a, b, c = mon("a"), mon("b", command="echo b"), mon("c", command="echo c")
    changes = by_name(diff({N("a"): a, N("b"): b}, {N("b"): b, N("c"): c}))
    assert changes["a"].action is ChangeKind.START
    assert changes["a"].reason == "new file monitors.d/a.yml"
    assert changes["b"].action is ChangeKind.UNCHANGED
    assert changes["c"].action is ChangeKind.STOP
    assert changes["c"].reason == "removed file monitors.d/c.yml"


def test_condition_edit_is_replace_with_field_changes() -> None:
    old = mon("ci", match="fail")
    new = mon("ci", match="fail|error")
    [change] = diff({N("ci"): new}, {N("ci"): old})
    assert change.action is ChangeKind.REPLACE
    assert "new baseline" in change.reason
    assert [(f.path, f.old, f.new) for f in change.fields] == [
        ("condition.match", "fail", "fail|error")]


def test_equivalent_durations_are_unchanged() -> None:
    [change] = diff({N("a"): mon("a", interval="60s")}, {N("a"): mon("a", interval="1m")})
    assert change.action is ChangeKind.UNCHANGED


def test_rate_limit_edit_is_update_in_place() -> None:
    old = mon("a", rate={"max": 5, "per": "1m"})
    new = mon("a", rate={"max": 10, "per": "1m"})
    [change] = diff({N("a"): new}, {N("a"): old})
    assert change.action is ChangeKind.UPDATE
    assert "baseline kept" in change.reason
    assert [(f.path, f.old, f.new) for f in change.fields] == [("rateLimit.max", 5, 10)]


def test_same_fingerprint_new_name_is_rename() -> None:
    old = mon("old-name")
    new = mon("new-name")
    changes = diff({N("new-name"): new}, {N("old-name"): old})
    [change] = changes
    assert change.action is ChangeKind.RENAME
    assert change.old_name == "old-name" and change.name == "new-name"


def test_rename_needs_a_unique_pair() -> None:
    one, two = mon("x1"), mon("x2")
    changes = by_name(diff({N("new"): mon("new")}, {N("x1"): one, N("x2"): two}))
    assert {c.action for c in changes.values()} == {ChangeKind.START, ChangeKind.STOP}


def test_invalid_file_keeps_last_applied_version() -> None:
    good = mon("a")
    changes = diff({N("a"): good}, {N("a"): good},
                   invalid={N("a"): "monitors.d/a.yml:3:1: error: bad [yaml-syntax]"})
    [change] = changes
    assert change.action is ChangeKind.KEEP
    assert "yaml-syntax" in (change.error or "")


def test_paused_running_monitor_stops_with_overlay_reason() -> None:
    m = mon("a")
    paused = monitor({"type": "poll", "command": "echo hi", "interval": "30s"}, name="a",
                     pause=Pause(reason="noisy", until="2030-01-01T00:00:00Z"),
                     overlay=Path("monitors.d/overlays/a.yml"))
    desired = desired_mod.desired_set({N("a"): paused}, owner=lambda _: placement.Placement(
        True, None, "here"))
    changes = diff(desired.monitors, {N("a"): m}, excluded=desired.excluded)
    [change] = changes
    assert change.action is ChangeKind.STOP
    assert change.reason == ('paused by overlay monitors.d/overlays/a.yml '
                             '(reason "noisy", until 2030-01-01T00:00:00Z)')


def owner_here(device: str = "me", devices: tuple[str, ...] = ()) -> desired_mod.OwnerFn:
    f = fleet.Fleet(tuple(fleet.Device(d) for d in devices), exists=bool(devices))  # type: ignore[arg-type]
    return lambda m: placement.owner_decision(m, device=device, fleet=f)


def test_desired_set_reasons() -> None:
    monitors = {
        N("off"): mon("off", command="a", enabled=False),
        N("other"): mon("other", command="b", device="box-2"),
        N("mine"): mon("mine", command="c", device="me"),
        N("hot"): mon("hot", command="d"),
    }
    desired = desired_mod.desired_set(monitors, owner=owner_here(), autopaused={N("hot"): "rate"},
                                   invalid={N("broken"): "x.yml:1:1: error: no"})
    assert set(desired.monitors) == {"mine"}
    assert desired.excluded[N("off")].kind == "disabled"
    assert desired.excluded[N("other")].reason == "owner is box-2: pinned to box-2"
    assert desired.excluded[N("hot")].kind == "autopaused"
    assert desired.excluded[N("broken")].kind == "invalid"


def make(desired: dict[str, Monitor], running: dict[str, Monitor], *,
         allow_mass_stop: bool = False, **kw: Any) -> plan_mod.Plan:
    d = desired_mod.desired_set({N(k): v for k, v in desired.items()}, owner=owner_here())
    basis = plan_mod.Basis(device="me", daemon_running=True, generation=3, digest="sha256:x",
                           **kw)
    return plan_mod.make(d, {N(k): v for k, v in running.items()}, basis,
                         allow_mass_stop=allow_mass_stop)


def test_summary_lines() -> None:
    running = {f"m{i}": mon(f"m{i}", command=f"echo {i}") for i in range(4)}
    desired = dict(running)
    desired["m0"] = mon("m0", command="echo changed")
    desired["m1"] = mon("m1", command="echo 1", rate={"max": 1, "per": "1m"})
    del desired["m2"]
    desired["new"] = mon("new", command="echo new")
    plan = make(desired, running)
    assert plan.summary() == "Plan: 1 to start, 1 to replace, 1 to update, 1 to stop, 1 unchanged."
    assert plan.has_changes
    still = make(running, running)
    assert still.summary() == "No changes. 4 monitors run as the repository says."
    assert not still.has_changes


@pytest.mark.parametrize(("running", "stopping", "held"), [
    (1, 1, False),   # deleting one's only monitor is ordinary
    (2, 2, True),    # all of them
    (4, 3, False),   # fewer than five running: only "all" trips
    (5, 3, True),    # more than half of at least five
    (10, 5, False),  # exactly half is not more than half
    (10, 6, True),
])
def test_mass_stop_guard(running: int, stopping: int, held: bool) -> None:
    ms = {f"m{i}": mon(f"m{i}", command=f"echo {i}") for i in range(running)}
    desired = dict(list(ms.items())[stopping:])
    plan = make(desired, ms)
    assert (plan.mass_stop is not None) is held
    assert all(c.held is held for c in plan.changes if c.action is ChangeKind.STOP)
    allowed = make(desired, ms, allow_mass_stop=True)
    assert allowed.mass_stop is None
    assert not any(c.held for c in allowed.changes)


def test_saved_plan_staleness() -> None:
    ms = {"a": mon("a")}
    plan = make(ms, {}, commit="abc")
    saved = saved_mod.SavedPlan.from_json(plan.to_json())
    assert saved_mod.stale_reasons(saved, plan) == []
    moved = make({"a": mon("a", command="echo other")}, {}, commit="abc")
    assert saved_mod.stale_reasons(saved, moved) == [
        "the desired set changed (fleet file, device, a pause expiry or an auto-pause)"]
    later = plan_mod.make(desired_mod.desired_set({N("a"): ms["a"]}, owner=owner_here()), {},
                          plan_mod.Basis(device="me", daemon_running=True, generation=4,
                                         digest="sha256:y", commit="def"))
    reasons = saved_mod.stale_reasons(saved, later)
    assert any("commit changed from abc to def" in r for r in reasons)
    assert any("files changed" in r for r in reasons)
    assert any("generation changed from 3 to 4" in r for r in reasons)
    with pytest.raises(ValueError):
        saved_mod.SavedPlan.from_json({"format": "other"})


def test_registry_round_trip(tmp_path: Path) -> None:
    m = mon("a", rate={"max": 2, "per": "5m"}, labels={"team": "x"}, device="me")
    m2 = monitor({"type": "file", "path": "x"}, name="b", scope=Scope.SYSTEM,
                 pause=Pause(reason="r"), overlay=Path("o.yml"))
    reg = registry.Registry(entries={N("a"): registry.Entry(m, 2, "t"),
                                     N("b"): registry.Entry(m2, 1, "u")},
                            generation=2, commit="abc", device="me", running=True)
    import reconciler.atomic  # noqa: F401  (publish uses it)

    registry.publish(tmp_path, reg)
    back = registry.load(tmp_path)
    assert back.entries[N("a")].monitor == m
    assert back.entries[N("b")].monitor == m2
    assert back.generation == 2 and back.commit == "abc" and back.running


def test_registry_future_version_refused_and_corrupt_moved_aside(tmp_path: Path) -> None:
    from reconciler import errors

    (tmp_path / "running.json").write_text('{"format": 99}')
    with pytest.raises(errors.StateError, match="newer"):
        registry.load(tmp_path)
    assert (tmp_path / "running.json").read_text() == '{"format": 99}'
    (tmp_path / "running.json").write_text('{"format": 1, "monit')
    reg, note = registry.load_checked(tmp_path)
    assert reg.entries == {} and note and "moved aside" in note
    assert (tmp_path / "running.json.corrupt-0").exists()


# -- duplicates (one trigger fired twice): one runs, the others are held ----------------------


def test_duplicates_one_is_planned_the_others_are_held() -> None:
    d1, d2 = mon("d1"), mon("d2")
    assert d1.fingerprint == d2.fingerprint
    desired = desired_mod.desired_set({N("d2"): d2, N("d1"): d1}, owner=owner_here())
    assert set(desired.monitors) == {"d1"}  # the first by name
    assert desired.excluded[N("d2")].kind == "duplicate"
    assert desired.excluded[N("d2")].reason == (
        "duplicate of d1 (same fingerprint); set allowDuplicate: true if deliberate")
    plan = plan_mod.make(desired, {}, plan_mod.Basis(device="me", daemon_running=True,
                                                     generation=0, digest=""))
    assert [(c.name, c.action) for c in plan.changes] == [("d1", ChangeKind.START)]
    assert plan.to_json()["excluded"] == [{"name": "d2", "kind": "duplicate",
                                           "reason": desired.excluded[N("d2")].reason}]


def test_declared_duplicates_run() -> None:
    a = mon("a", allowDuplicate=True)
    b, c = mon("b"), mon("c")
    desired = desired_mod.desired_set({N("a"): a, N("b"): b}, owner=owner_here())
    assert set(desired.monitors) == {"a", "b"}  # all but one declare it: deliberate
    three = desired_mod.desired_set({N("a"): a, N("b"): b, N("c"): c}, owner=owner_here())
    assert set(three.monitors) == {"a", "b"} and three.excluded[N("c")].kind == "duplicate"


def test_paused_or_foreign_copies_are_not_duplicates_here() -> None:
    d1 = mon("d1")
    d2 = mon("d2", enabled=False)
    d3 = mon("d3", device="box-2")
    desired = desired_mod.desired_set({N("d1"): d1, N("d2"): d2, N("d3"): d3}, owner=owner_here())
    assert set(desired.monitors) == {"d1"}
    assert desired.excluded[N("d2")].kind == "disabled"
    assert desired.excluded[N("d3")].kind == "elsewhere"


def test_the_running_duplicate_keeps_running() -> None:
    d1, d2 = mon("d1"), mon("d2")
    desired = desired_mod.desired_set({N("d1"): d1, N("d2"): d2}, owner=owner_here(),
                                   last_good={N("d2"): d2})
    plan = plan_mod.make(desired, {N("d2"): d2}, plan_mod.Basis(
        device="me", daemon_running=True, generation=1, digest=""))
    changes = by_name(list(plan.changes))
    assert set(changes) == {"d2"} and changes["d2"].action is ChangeKind.UNCHANGED
    assert plan.excluded[N("d1")].reason.startswith("duplicate of d2 (same fingerprint)")
    assert not plan.has_changes


def test_a_running_copy_edited_into_a_duplicate_is_kept_at_its_applied_version() -> None:
    d1, old_d2, new_d2 = mon("d1"), mon("d2", command="echo old"), mon("d2")
    running = {N("d1"): d1, N("d2"): old_d2}
    desired = desired_mod.desired_set({N("d1"): d1, N("d2"): new_d2}, owner=owner_here(),
                                   last_good=running)
    plan = plan_mod.make(desired, running, plan_mod.Basis(device="me", daemon_running=True,
                                                          generation=1, digest=""))
    changes = by_name(list(plan.changes))
    assert changes["d1"].action is ChangeKind.UNCHANGED
    keep = changes["d2"]
    assert keep.action is ChangeKind.KEEP and keep.monitor == old_d2
    assert keep.reason == "duplicate of d1 (same fingerprint)"
    assert keep.error == ("duplicate of d1 (same fingerprint); set allowDuplicate: true if "
                          "deliberate")
    assert not plan.has_changes


# -- mass-stop guard: pauses and disables are deliberate ---------------------------------------


def _paused(m: Monitor) -> Monitor:
    from dataclasses import replace

    return replace(m, pause=Pause(reason="quiet"), overlay=Path(f"overlays/{m.name}.yml"))


def test_pausing_most_monitors_is_not_held() -> None:
    ms = {f"m{i}": mon(f"m{i}", command=f"echo {i}") for i in range(5)}
    desired = {k: (_paused(v) if k in ("m0", "m1", "m2") else v) for k, v in ms.items()}
    plan = make(desired, ms)
    assert plan.mass_stop is None
    stops = [c for c in plan.changes if c.action is ChangeKind.STOP]
    assert [c.name for c in stops] == ["m0", "m1", "m2"] and not any(c.held for c in stops)
    disabled = {k: (mon(k, command=f"echo {k[1]}", enabled=False) if k != "m4" else v)
                for k, v in ms.items()}
    assert make(disabled, ms).mass_stop is None


def test_removed_files_still_trip_the_guard_and_pauses_are_not_held_with_them() -> None:
    ms = {f"m{i}": mon(f"m{i}", command=f"echo {i}") for i in range(5)}
    desired = {"m0": _paused(ms["m0"]), "m4": ms["m4"]}  # m1..m3 removed, m0 paused
    plan = make(desired, ms)
    assert plan.mass_stop is not None and "3 of 5" in plan.mass_stop
    held = {c.name: c.held for c in plan.changes if c.action is ChangeKind.STOP}
    assert held == {"m0": False, "m1": True, "m2": True, "m3": True}


# -- errors in files: the summary counts them ----------------------------------------------


def test_summary_counts_files_with_errors() -> None:
    plan = make({"a": mon("a")}, {}, error_files=["monitors.d/x.yml", "monitors.d/y.yml",
                                                  "monitors.d/x.yml"])
    assert plan.error_files == ("monitors.d/x.yml", "monitors.d/y.yml")
    assert plan.summary().endswith(
        "0 unchanged. 2 files have errors (`monitors lint` shows them).")
    assert plan.to_json()["errorFiles"] == ["monitors.d/x.yml", "monitors.d/y.yml"]
    clean = make({"a": mon("a")}, {"a": mon("a")})
    assert clean.summary() == "No changes. 1 monitor runs as the repository says."



def test_known_names_the_desired_and_the_excluded_not_a_removed_file() -> None:
    # daemon.metrics forgets the series of monitors the layers no longer define
    monitors = {N("mine"): mon("mine"), N("off"): mon("off", command="echo off", enabled=False),
                N("moved"): mon("moved", command="echo moved", device="box-2"),
                N("paused"): _paused(mon("paused", command="echo p")),
                N("hot"): mon("hot", command="echo hot")}
    desired = desired_mod.desired_set(monitors, owner=owner_here(), autopaused={N("hot"): "rate"},
                                      invalid={N("broken"): "x.yml:1:1: error: no"})
    assert desired.known() == {"mine", "off", "moved", "paused", "hot", "broken"}
