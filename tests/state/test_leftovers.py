"""Crash leftovers in the state directory (``state.leftovers``) and fire counts that
agree with the fire records (``Store.fire_tally``)."""

from __future__ import annotations

import time
from pathlib import Path

from reconciler.events import Event
from reconciler.model import MonitorName
from reconciler.state import leftovers
from reconciler.state import store as store_mod


def event(eid: str) -> Event:
    return Event(id=eid, monitor=MonitorName("m"), fingerprint="sha256:x",  # type: ignore[arg-type]
                 fired_at="2026-01-01T00:00:00.000000Z", summary="s", signature="s",
                 observation="o", reason="changed")


def crashed_state(root: Path) -> dict[str, Path]:
    """A state directory as a SIGKILL at several instants leaves it."""
    s = store_mod.Store(root)
    s.create_fire("m", event("20260101T000000.000001-aaaaaaaa"), at=1.0)
    s.flush()
    fires = root / "monitors" / "m" / "fires"
    paths = {
        "root temp": root / ".running.json.k2j3h4.tmp",
        "liveness temp": root / "monitors" / "m" / ".liveness.json.tmp",
        "state temp": root / "monitors" / "m" / ".state.json.x8y7z6.tmp",
        "record temp": fires / "20260101T000000.000001-aaaaaaaa" / ".event.json.q1w2e3.tmp",
        "empty fire": fires / "20260101T000000.000002-bbbbbbbb",
        "temp-only fire": fires / "20260101T000000.000003-cccccccc",
        "fire with output": fires / "20260101T000000.000004-dddddddd",
    }
    for key in ("empty fire", "temp-only fire", "fire with output"):
        paths[key].mkdir()
    (paths["temp-only fire"] / ".event.json.a1b2c3.tmp").write_text("{")
    (paths["fire with output"] / "output.log").write_text("half a run\n")
    for key in ("root temp", "liveness temp", "state temp", "record temp"):
        paths[key].write_text("torn")
    return paths


def test_sweep_removes_temps_and_fire_dirs_without_a_record(tmp_path: Path) -> None:
    paths = crashed_state(tmp_path)
    swept = leftovers.sweep(tmp_path)
    assert sorted(swept.temps) == sorted([paths["root temp"], paths["liveness temp"],
                                          paths["state temp"], paths["record temp"],
                                          paths["temp-only fire"] / ".event.json.a1b2c3.tmp"])
    assert sorted(swept.fire_dirs) == [paths["empty fire"], paths["temp-only fire"]]
    assert [line.split(":")[0] for line in swept.kept] == [str(paths["fire with output"])]
    assert "without event.json (holds output.log)" in swept.kept[0]
    assert swept.summary() == ("removed what a crash left in the state directory: 5 temp "
                               "file(s), 2 fire directory(ies) without event.json")
    for key in ("root temp", "liveness temp", "state temp", "record temp", "empty fire",
                "temp-only fire"):
        assert not paths[key].exists(), key
    s = store_mod.Store(tmp_path)
    assert s.fire_ids("m") == ["20260101T000000.000004-dddddddd",
                               "20260101T000000.000001-aaaaaaaa"]
    assert leftovers.sweep(tmp_path).summary() is None  # a second sweep finds nothing


def test_fire_tally_counts_the_records_not_the_liveness_file(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    for i in range(3):
        s.create_fire("m", event(f"20260101T000000.00000{i}-aaaaaaaa"), at=1.0)
    s.flush()
    # a daemon killed between flushes: two more records, the liveness file still says 3
    killed = store_mod.Store(tmp_path)
    for i in (3, 4):
        killed.create_fire("m", event(f"20260101T000000.00000{i}-aaaaaaaa"), at=1.0)
    # and a kill between mkdir and event.json: a directory, but no fire
    (tmp_path / "monitors" / "m" / "fires" / "20260101T000001.000000-torn0000").mkdir()
    fresh = store_mod.Store(tmp_path)
    assert fresh.liveness("m")["fireCount"] == 3  # type: ignore[index]
    tally = fresh.fire_tally("m")
    assert tally["fireCount"] == 5 == len(fresh.fires("m"))
    assert tally["lastFiredAt"] == 1767225600.000004  # from the newest id (UTC)
    assert fresh.fire_tally("other") == {"fireCount": 0, "lastFiredAt": None}


def test_sweep_and_tally_of_ten_thousand_fires_are_fast(tmp_path: Path) -> None:
    fires = tmp_path / "monitors" / "m" / "fires"
    for i in range(10_000):
        d = fires / f"20260101T{i // 3600 % 24:02d}{i // 60 % 60:02d}{i % 60:02d}.{i:06d}-aaaaaaaa"
        d.mkdir(parents=True)
        (d / "event.json").write_text("{}")
    start = time.perf_counter()
    assert leftovers.sweep(tmp_path).summary() is None
    swept_in = time.perf_counter() - start
    start = time.perf_counter()
    assert store_mod.Store(tmp_path).fire_tally("m")["fireCount"] == 10_000
    tallied_in = time.perf_counter() - start
    assert swept_in < 2.0 and tallied_in < 0.5, (swept_in, tallied_in)
