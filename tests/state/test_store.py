"""The state store: atomic writes, the lock, versioned records, fire records, liveness."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reconciler import atomic, errors
from reconciler.events import Event
from reconciler.model import MonitorName
from reconciler.state import lock, records
from reconciler.state import store as store_mod
from tests.factories import monitor

ROOT = Path(__file__).resolve().parents[2]


def event(eid: str = "20260101T000000.000000-aaaaaaaa", name: str = "m") -> Event:
    return Event(id=eid, monitor=MonitorName(name), fingerprint="sha256:x",  # type: ignore[arg-type]
                 fired_at="2026-01-01T00:00:00.000000Z", summary="s", signature="s",
                 observation="o", reason="changed")


def test_write_bytes_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic.write_json(target, {"x": 1}, durable=True)
    atomic.write_json(target, {"x": 2}, durable=False)
    assert json.loads(target.read_text()) == {"x": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_write_failure_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    atomic.write_json(target, {"x": 1}, durable=True)
    with pytest.raises(TypeError):
        atomic.write_json(target, {"x": object()}, durable=True)
    assert json.loads(target.read_text()) == {"x": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


WRITER = textwrap.dedent("""
    import sys, os
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from reconciler.state import store
    s = store.Store(Path({state!r}))
    i = 0
    print("ready", flush=True)
    while True:
        i += 1
        pad = "x" * (1000 + (i * 7919) % 200000)
        s.write_state("m", {{"n": i, "pad": pad, "len": len(pad)}})
""")


def test_sigkill_mid_write_leaves_old_or_new_never_torn(tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = state / "monitors" / "m" / "state.json"
    seen: set[int] = set()
    for round_ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER.format(root=str(ROOT), state=str(state))],
            stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.02 + (round_ % 5) * 0.013)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        data = json.loads(path.read_text())  # never torn: always parses
        assert data["version"] == records.STATE_VERSION
        assert len(data["pad"]) == data["len"]
        seen.add(data["n"])
        loaded = store_mod.Store(state).read_state("m")
        assert loaded is not None and loaded["n"] == data["n"]
    assert max(seen) > 1


def test_lock_refuses_second_holder_and_names_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {str(ROOT)!r})
            from pathlib import Path
            from reconciler.state import lock
            with lock.StateLock(Path({str(tmp_path)!r})):
                print("held", flush=True)
                time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert lock.is_locked(tmp_path)
        with pytest.raises(errors.LockedError) as info, lock.StateLock(tmp_path):
            pass
        assert info.value.pid == holder.pid
        assert str(holder.pid) in str(info.value)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    # The kernel released the dead holder's lock.
    with lock.StateLock(tmp_path):
        assert lock.holder_pid(tmp_path) == os.getpid()


def test_future_version_is_kept_reported_and_refused(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    d = tmp_path / "monitors" / "m"
    d.mkdir(parents=True)
    raw = '{"version": 99, "fingerprint": "x"}'
    (d / "state.json").write_text(raw)
    with pytest.raises(records.FutureVersionError, match="version 99"):
        s.read_state("m")
    assert (d / "state.json").read_text() == raw
    assert any("version 99" in p for p in s.problems)


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '{"fingerprint": "x"}', "\xff\xfe"])
def test_corrupt_record_moved_aside_and_reported(tmp_path: Path, raw: str) -> None:
    s = store_mod.Store(tmp_path)
    d = tmp_path / "monitors" / "m"
    d.mkdir(parents=True)
    (d / "state.json").write_text(raw, encoding="latin-1")
    assert s.read_state("m") is None
    assert not (d / "state.json").exists()
    moved = s.quarantined()
    assert len(moved) == 1 and moved[0].name.startswith("state.json.corrupt-")
    assert moved[0].read_text(encoding="latin-1") == raw
    assert any("moved aside" in p for p in s.problems)


def test_fire_records_newest_first_update_and_pending(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    ids = ["20260101T000000.000001-aaaaaaaa", "20260101T000000.000002-bbbbbbbb"]
    for eid in ids:
        path = s.create_fire("m", event(eid), state={"fingerprint": "f"}, at=1.0)
        assert path == tmp_path / "monitors" / "m" / "fires" / eid / "event.json"
    rec = s.fires("m")
    assert [r["id"] for r in rec] == ids[::-1]
    assert rec[0]["status"] == "pending" and rec[0]["attempts"] == 0
    assert rec[0]["version"] == records.FIRE_VERSION and rec[0]["reasons"] == ["changed"]
    assert rec[0]["event"]["event"] == "s" and rec[0]["state"] == {"fingerprint": "f"}
    s.update_fire("m", ids[0], status="succeeded", attempts=1)
    assert [r["id"] for _, r in s.pending_fires()] == [ids[1]]
    assert s.fires("m", limit=1)[0]["id"] == ids[1]
    with pytest.raises(errors.StateError):
        s.update_fire("m", "20990101T000000.000000-cccccccc", status="x")
    assert s.liveness("m")["fireCount"] == 2  # type: ignore[index]


def test_liveness_coalesced_until_flush_and_survives_restart(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    for i in range(50):
        s.record_check("m", ok=True, error=None, at=float(i))
    path = tmp_path / "monitors" / "m" / "liveness.json"
    assert not path.exists()  # nothing written per poll
    assert s.flush() == 1
    assert s.flush() == 0
    s.record_check("m", ok=False, error="timeout: slow", at=60.0)
    s.record_check("m", ok=False, error="timeout: slow", at=61.0)
    s.flush()
    again = store_mod.Store(tmp_path)
    live = again.liveness("m")
    assert live is not None
    assert live["checkCount"] == 52 and live["consecutiveErrors"] == 2
    assert live["lastError"] == "timeout: slow" and live["lastCheckedAt"] == 61.0
    again.record_check("m", ok=True, error=None, at=62.0)
    live2 = again.liveness("m")
    assert live2 is not None and live2["checkCount"] == 53 and live2["consecutiveErrors"] == 0


def test_readme_written_on_first_write_only(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path / "st")
    assert s.read_state("m") is None and s.liveness("m") is None
    assert not (tmp_path / "st").exists()  # reads create nothing
    s.write_state("m", {"fingerprint": "f"})
    assert "state.json" in (tmp_path / "st" / "README").read_text()


def test_autopause_survives_restart_and_clears(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    assert s.autopause("m") is None
    s.set_autopause("m", "rate limit 5/1m exceeded", 0.0)
    assert store_mod.Store(tmp_path).autopause("m")["reason"].startswith("rate")  # type: ignore[index]
    s.clear_autopause("m")
    assert s.autopause("m") is None and store_mod.Store(tmp_path).autopause("m") is None


def test_autopause_reasons_name_every_paused_monitor_once(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    s.set_autopause("hot", "rate limit: more than 3 fires within 1m", 0.0)
    s.write_state("calm", {"fingerprint": "f"})
    assert store_mod.Store(tmp_path).autopause_reasons() == {
        "hot": "rate limit: more than 3 fires within 1m (since 1970-01-01T00:00:00.000000Z; "
               "`monitors resume` clears it)"}


def test_rename_carries_state_over(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    s.write_state("old", {"fingerprint": "f", "lastSignature": "x"})
    s.record_check("old", ok=True, error=None, at=5.0)
    s.rename("old", "new")
    assert s.read_state("old") is None
    assert s.read_state("new")["lastSignature"] == "x"  # type: ignore[index]
    assert s.liveness("new")["checkCount"] == 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("live", "now", "expected"),
    [
        (None, 100.0, "never polled"),
        ({"lastCheckedAt": 88.0, "checkCount": 42}, 100.0,
         "checked 42x · last 12s ago · no match yet"),
        ({"lastCheckedAt": 90.0, "checkCount": 3, "consecutiveErrors": 3,
          "lastError": "connect: refused"}, 100.0, "checked 3x · error: connect: refused"),
        ({"lastCheckedAt": 0.0, "checkCount": 3}, 7200.0, "STALLED · last poll 2h ago"),
        ({"lastCheckedAt": 99.0, "checkCount": 3, "fireCount": 2, "lastFiredAt": 40.0},
         100.0, "checked 3x · last 1s ago · fired 2x, last 1m ago"),
    ],
)
def test_liveness_view(live: dict[str, float] | None, now: float, expected: str) -> None:
    m = monitor({"type": "poll", "command": "true", "interval": "30s"},
                condition={"mode": "match", "match": "x"})
    view = store_mod.liveness_view(live, m, now)
    assert view["text"] == expected
    assert view["stalled"] == expected.startswith("STALLED")


def test_stalled_only_when_enabled_and_owned() -> None:
    m = monitor({"type": "poll", "command": "true", "interval": "30s"}, enabled=False)
    assert not store_mod.liveness_view({"lastCheckedAt": 0.0, "checkCount": 1}, m, 1e6)["stalled"]
    m2 = monitor({"type": "poll", "command": "true", "interval": "30s"})
    view = store_mod.liveness_view({"lastCheckedAt": 0.0, "checkCount": 1}, m2, 1e6, owned=False)
    assert not view["stalled"]


def test_failing_names_the_monitors_whose_last_checks_failed(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    s.record_check("ok", ok=True, error=None, at=1.0)
    s.record_check("down", ok=False, error="exit 1", at=1.0)
    s.record_check("back", ok=False, error="exit 1", at=1.0)
    s.record_check("back", ok=True, error=None, at=2.0)
    assert s.failing() == {"down"}
    s.record_check("down", ok=True, error=None, at=3.0)
    assert s.failing() == set()


def test_monitor_dirs_are_made_once_per_name_and_kept_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.state import layout

    monkeypatch.setattr(layout, "DIRS_KEPT", 3)
    s = store_mod.Store(tmp_path)
    first = s.monitor_dir("a")
    assert first == tmp_path / "monitors" / "a" and s.monitor_dir("a") is first
    for name in ("b", "c", "d", "e"):
        assert s.monitor_dir(name) == tmp_path / "monitors" / name
    assert len(s._dirs) <= 3 and s.monitor_dir("a") == first
    with pytest.raises(errors.StateError):
        s.monitor_dir("../escape")  # still checked, never kept
