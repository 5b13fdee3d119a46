"""The periodic resync: a resync that changes nothing does not republish running.json."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.client import control as client
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def _file_id(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


def _last_reconcile(d: Daemon) -> dict[str, Any]:
    reply = client.status(d.repo.state) or {}
    last: dict[str, Any] = reply.get("lastReconcile") or {}
    return last


def _wait_resync_after(d: Daemon, at: str) -> str:
    last = wait_for(lambda: (lambda r: r if r.get("trigger") == "resync"
                             and r.get("at", "") > at else None)(_last_reconcile(d)),
                    what=f"a resync after {at}", log=d.log)
    assert last is not None
    return str(last["at"])


def test_noop_resync_does_not_republish_running_json(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, a]", interval="1s"))
    d = daemons("--resync", "1s").start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    running = repo.state / "running.json"
    before = _file_id(running)
    at = _wait_resync_after(d, str(_last_reconcile(d).get("at", "")))
    _wait_resync_after(d, at)
    assert _file_id(running) == before  # used to be rewritten (fsync) at every resync
    # a change is published
    repo.write("monitors.d/b.yml", monitor_yaml("b", "[echo, b]", interval="1s"))
    wait_for(lambda: set(d.running()) == {"a", "b"}, what="b running", log=d.log)
    # a deleted running.json comes back at the next resync although nothing changed
    running.unlink()
    wait_for(lambda: set(d.running()) == {"a", "b"}, what="running.json republished",
             log=d.log)
    assert d.stop() == 0
    doc = d.running()
    assert set(doc) == {"a", "b"}
