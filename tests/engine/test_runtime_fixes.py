"""Runtime findings on the engine side: newer state versions are never overwritten,
STALLED only for a running evaluator, signature and summary text agree, a cancelled
spawn leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from reconciler import conditions
from reconciler.model import Observation
from reconciler.state import records
from reconciler.state import store as store_mod
from tests.helpers import monitor

SRC = {"type": "poll", "command": "true", "interval": "30s"}


def test_write_state_refuses_a_newer_version_that_appeared_after_the_read(
        tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    store.write_state("m", {"a": 1})
    assert store.read_state("m") == {"a": 1, "version": records.STATE_VERSION}
    path = store.monitor_dir("m") / store_mod.STATE_FILE
    future = json.dumps({"version": 99, "x": "kept"})
    path.write_text(future)  # a newer monitors wrote it meanwhile
    with pytest.raises(records.FutureVersionError, match="format version 99, newer"):
        store.write_state("m", {"a": 2})
    assert path.read_text() == future
    assert store.refusal("m") == store_mod.refused_reason(99)
    assert store_mod.refused_reason(99) == (
        "state.json has format version 99, newer than this monitors supports (kept untouched)")


def test_write_state_without_outside_change_does_not_reread(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    store.write_state("m", {"a": 1})
    store.write_state("m", {"a": 2})  # its own file: the stat matches, no re-read
    assert store.read_state("m") == {"a": 2, "version": records.STATE_VERSION}
    assert store.refusal("m") is None and store.refusal("other") is None
    # a corrupt file written outside is overwritten as before (not a newer version)
    (store.monitor_dir("m") / store_mod.STATE_FILE).write_text("{not json")
    store.write_state("m", {"a": 3})
    assert store.read_state("m") == {"a": 3, "version": records.STATE_VERSION}


def test_store_does_not_recreate_a_deleted_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = store_mod.Store(state)
    store.write_state("m", {"a": 1})
    import shutil

    shutil.rmtree(state)
    with pytest.raises(OSError):
        store.write_state("m", {"a": 2})
    assert not state.exists()


def test_not_running_monitor_is_never_stalled() -> None:
    m = monitor(SRC)
    live = {"lastCheckedAt": 0.0, "checkCount": 3}
    assert store_mod.liveness_view(live, m, 1e6)["stalled"]
    view = store_mod.liveness_view(live, m, 1e6, running=False)
    assert not view["stalled"] and "STALLED" not in view["text"]


@pytest.mark.parametrize("cond", [None, {"mode": "every"}, {"mode": "match", "match": "done"}])
def test_signature_and_summary_agree_on_a_trailing_newline(cond: dict[str, str] | None
                                                           ) -> None:
    m = monitor(SRC, condition=cond)
    d = conditions.decide(m, Observation("done\n"), None)
    assert d.signature == "done" and d.summary == "done"


def test_a_signature_stored_with_its_newline_does_not_fire_after_upgrade() -> None:
    m = monitor(SRC)
    old = {"fingerprint": m.fingerprint, "mode": "on-change", "baseline": "done\n",
           "lastSignature": "done\n"}
    d = conditions.decide(m, Observation("done\n"), old)
    assert not d.fire and d.reason == "unchanged" and d.persist
    assert d.state["lastSignature"] == "done"
    again = conditions.decide(m, Observation("done\n"), d.state)
    assert not again.fire and not again.persist
    assert conditions.decide(m, Observation("other\n"), d.state).fire
    mm = monitor(SRC, condition={"mode": "match", "match": "fail"})
    prev = {"fingerprint": mm.fingerprint, "mode": "match", "matching": True,
            "lastSignature": "fail 1\n"}
    d2 = conditions.decide(mm, Observation("fail 1\n"), prev)
    assert not d2.fire and d2.persist and d2.state["lastSignature"] == "fail 1"


def test_cancel_while_spawning_kills_the_process_group(tmp_path: Path) -> None:
    from reconciler.sources import process

    pidfile = tmp_path / "pid"

    async def go() -> None:
        spec = {"command": f"sleep 300 & echo $! > {pidfile}; wait"}
        task = asyncio.ensure_future(process.spawn(spec))
        await asyncio.sleep(0)  # the child is being set up
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    # either the shell never got as far as the background sleep, or it is killed
    deadline = asyncio.run(_wait_pidfile(pidfile))
    if deadline is not None:
        assert _wait_dead(deadline), "the background sleep outlived a cancelled spawn"


async def _wait_pidfile(path: Path) -> int | None:
    for _ in range(50):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.02)
    return None


def _wait_dead(pid: int) -> bool:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    os.kill(pid, 9)
    return False
