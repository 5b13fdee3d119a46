"""The liveness flush: concurrent flushes, the aggregate file, crash safety."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.state import store as store_mod

ROOT = Path(__file__).resolve().parents[2]


def test_concurrent_flushes_never_share_a_temp_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The periodic flush, a first-check flush and a stop can flush at the same time; a
    # shared temp name made one of them fail (or rename the other's half-written file).
    caplog.set_level(logging.INFO, logger="monitors")
    s = store_mod.Store(tmp_path)
    s.record_check("m", ok=True, error=None, at=0.0)
    s.flush()
    start = threading.Barrier(4)
    raised: list[BaseException] = []

    def hammer(worker: int) -> None:
        try:
            start.wait()
            for i in range(400):
                s.record_check("m", ok=True, error=None, at=float(i))
                s.record_check(f"w{worker}", ok=True, error=None, at=float(i))
                s.flush()
        except BaseException as e:
            raised.append(e)

    threads = [threading.Thread(target=hammer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert raised == []
    assert "cannot write" not in caplog.text  # no write failed, not even once
    assert s.write_errors() == {}
    s.flush()
    again = store_mod.Store(tmp_path, readonly=True)
    assert (again.liveness("m") or {}).get("checkCount") == 1 + 4 * 400
    leftovers = [p.name for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []


def own_file(state: Path, name: str) -> dict[str, Any] | None:
    path = state / "monitors" / name / "liveness.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_a_flush_writes_one_file_for_all_monitors(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    for i in range(300):
        s.record_check(f"m{i}", ok=True, error=None, at=1.0)
    s.flush_files(["m0"])  # a first check: its own file at once
    for i in range(300):
        s.record_check(f"m{i}", ok=True, error=None, at=2.0)
    assert s.flush() == 300
    everything = json.loads((tmp_path / "liveness.json").read_text())
    assert everything["version"] == 1 and len(everything["monitors"]) == 300
    assert everything["monitors"]["m7"]["checkCount"] == 2
    assert (own_file(tmp_path, "m0") or {})["checkCount"] == 1  # not rewritten per flush
    assert own_file(tmp_path, "m7") is None
    reader = store_mod.Store(tmp_path, readonly=True)
    assert (reader.liveness("m0") or {})["checkCount"] == 2  # the newer of the two
    assert (reader.liveness("m7") or {})["lastCheckedAt"] == 2.0
    assert s.flush() == 0  # nothing changed: nothing written


def test_own_file_follows_the_error_line(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    s.record_check("m", ok=True, error=None, at=1.0)
    s.flush()
    assert own_file(tmp_path, "m") is None
    s.record_check("m", ok=False, error="timeout: slow", at=2.0)
    s.flush()
    assert (own_file(tmp_path, "m") or {})["lastError"] == "timeout: slow"
    s.record_check("m", ok=False, error="timeout: slow", at=3.0)
    s.flush()
    assert (own_file(tmp_path, "m") or {})["consecutiveErrors"] == 1  # same line: kept
    s.record_check("m", ok=True, error=None, at=4.0)
    s.flush()
    live = own_file(tmp_path, "m") or {}
    assert live["lastError"] is None and live["consecutiveErrors"] == 0


def test_stopped_and_not_restarted_monitors_keep_their_heartbeat(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    for name in ("kept", "stopped"):
        for i in range(5):
            s.record_check(name, ok=True, error=None, at=float(i))
    s.forget("stopped")  # a stop: no file of its own is written
    s.record_check("kept", ok=True, error=None, at=9.0)
    s.flush()
    # A restarted daemon runs only "kept": its flushes still carry "stopped".
    again = store_mod.Store(tmp_path)
    again.record_check("kept", ok=True, error=None, at=10.0)
    again.flush()
    reader = store_mod.Store(tmp_path, readonly=True)
    assert (reader.liveness("stopped") or {})["checkCount"] == 5
    assert (reader.liveness("kept") or {})["checkCount"] == 7
    # Deleting a monitor's directory starts it afresh.
    shutil.rmtree(tmp_path / "monitors" / "stopped")
    assert store_mod.Store(tmp_path, readonly=True).liveness("stopped") is None
    third = store_mod.Store(tmp_path)
    third.record_check("kept", ok=True, error=None, at=11.0)
    third.flush()
    assert "stopped" not in json.loads((tmp_path / "liveness.json").read_text())["monitors"]


def test_a_newer_aggregate_is_kept_and_own_files_written_instead(tmp_path: Path) -> None:
    newer = b'{"version": 99, "monitors": {}}'
    (tmp_path / "liveness.json").write_bytes(newer)
    s = store_mod.Store(tmp_path)
    s.record_check("m", ok=True, error=None, at=1.0)
    assert s.flush() == 1
    assert (tmp_path / "liveness.json").read_bytes() == newer
    assert (own_file(tmp_path, "m") or {})["checkCount"] == 1
    assert any("version" in p for p in s.problems)


FLUSHER = """
import sys
from pathlib import Path
from reconciler.state import store as store_mod
s = store_mod.Store(Path(sys.argv[1]))
at = 0.0
while True:
    at += 1.0
    for i in range(2000):
        s.record_check(f"m{i}", ok=True, error=None, at=at)
    s.flush()
    if at == 2.0:
        print("flushing", flush=True)
"""


def test_sigkill_during_flushes_leaves_a_whole_aggregate(tmp_path: Path) -> None:
    for attempt in range(3):
        state = tmp_path / str(attempt)
        proc = subprocess.Popen([sys.executable, "-c", FLUSHER, str(state)],
                                stdout=subprocess.PIPE, cwd=ROOT)
        assert proc.stdout is not None and proc.stdout.readline() == b"flushing\n"
        time.sleep(0.05 * attempt)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        everything = json.loads((state / "liveness.json").read_text())
        assert len(everything["monitors"]) == 2000
        counts = {live["checkCount"] for live in everything["monitors"].values()}
        assert len(counts) == 1 and counts.pop() >= 2  # one snapshot, never a mix


def test_an_older_flush_finishing_last_does_not_replace_a_newer_one(tmp_path: Path) -> None:
    s = store_mod.Store(tmp_path)
    s.record_check("m", ok=True, error=None, at=1.0)
    older = s.flush_begin()
    assert older is not None and not s.flush_encode(older)  # encoded: checkCount 1
    s.record_check("m", ok=True, error=None, at=2.0)
    newer = s.flush_begin()
    assert newer is not None
    assert s.flush_finish(newer) == 1
    s.flush_finish(older)  # a slower writer: its snapshot is stale
    everything = json.loads((tmp_path / "liveness.json").read_text())
    assert everything["monitors"]["m"]["checkCount"] == 2
