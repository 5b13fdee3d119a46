"""Regression tests: a pause resumes at its expiry (not at the next resync), a no-op
resync does not republish ``running.json``, and the git revision is cached."""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import subprocess
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler import snapshot
from reconciler.client import control as client
from reconciler.config import overlays
from reconciler.model import Pause
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, monitor_yaml, wait_for


def _iso(unix: float) -> str:
    return dt.datetime.fromtimestamp(unix, dt.UTC).isoformat(timespec="seconds")


def test_expired_pause_resumes_at_expiry_not_at_the_next_resync(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/p.yml", monitor_yaml("p", "[echo, p]", interval="1s"))
    d = daemons("--resync", "60s").start()  # the last --resync wins: 60 s
    wait_for(lambda: "p" in d.running(), what="p running", log=d.log)
    until = math.ceil(time.time()) + 6.0
    repo.write("monitors.d/overlays/p.yml",
               f"monitor: p\npause:\n  reason: test\n  until: '{_iso(until)}'\n")
    wait_for(lambda: "p" not in d.running(), timeout=max(0.5, until - time.time() - 0.3),
             what="p paused (stopped) before its pause expires", log=d.log)
    # used to resume only at the next periodic resync, up to 60 s late
    wait_for(lambda: "p" in d.running(), timeout=(until - time.time()) + 6.0,
             what="p resumed within a few seconds of its pause expiry", log=d.log)
    assert time.time() >= until
    wait_for(lambda: "reconciled (pause expiry)" in d.log_text(), what="the expiry log line",
             log=d.log)
    assert d.stop() == 0


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


def test_next_pause_expiry_is_the_earliest_future_until() -> None:
    def overlay(name: str, until: str | None) -> overlays.Overlay:
        return overlays.Overlay(name, Path(f"{name}.yml"), Pause(reason="r", until=until), None)

    result = types.SimpleNamespace(overlays={
        "a": overlay("a", "2026-01-01T00:00:10Z"), "b": overlay("b", "2026-01-01T00:00:05Z"),
        "c": overlay("c", "2026-01-01T00:00:01Z"), "d": overlay("d", None),
        "e": overlay("e", "not a time")})
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    assert snapshot.next_pause_expiry(result, now=base + 2) == base + 5
    assert snapshot.next_pause_expiry(result, now=base + 5) == base + 10
    assert snapshot.next_pause_expiry(result, now=base + 10) is None


def _git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True,
                          text=True, timeout=30).stdout.strip()


def test_git_revision_is_cached_until_head_index_or_layers_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    (root / "a.yml").write_text("a: 1\n")
    _git(root, "add", "a.yml")
    _git(root, "commit", "-q", "-m", "one")
    calls: list[Path] = []
    real = snapshot._git_revision

    def counting(path: Path) -> tuple[str | None, bool]:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(snapshot, "_git_revision", counting)
    sha1 = _git(root, "rev-parse", "HEAD")

    def settled(digest: str) -> tuple[str | None, bool]:
        """Call until cached (``git status`` may refresh the index once)."""
        for _ in range(3):
            n = len(calls)
            answer = snapshot.git_revision(root, digest=digest)
            if len(calls) == n:
                return answer
        pytest.fail(f"never cached: {len(calls)} git runs")

    assert snapshot.git_revision(root, digest="d1") == (sha1, False)
    assert settled("d1") == (sha1, False)
    # a layer file edited (the loader digest changes): recomputed
    (root / "a.yml").write_text("a: 2\n")
    n = len(calls)
    assert snapshot.git_revision(root, digest="d2") == (sha1, True)
    assert len(calls) == n + 1
    assert settled("d2") == (sha1, True)
    # staged (the index changes), same digest: recomputed
    _git(root, "add", "a.yml")
    n = len(calls)
    assert snapshot.git_revision(root, digest="d2") == (sha1, True)
    assert len(calls) == n + 1
    # committed (HEAD's ref changes), same digest: the new commit, clean
    _git(root, "commit", "-q", "-m", "two")
    sha2 = _git(root, "rev-parse", "HEAD")
    assert sha2 != sha1
    assert snapshot.git_revision(root, digest="d2") == (sha2, False)
    assert settled("d2") == (sha2, False)
    # without a digest nothing is cached
    n = len(calls)
    snapshot.git_revision(root)
    snapshot.git_revision(root)
    assert len(calls) == n + 2


def test_broken_git_gives_no_revision_and_logs_at_debug(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("garbage\n")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    logger = logging.getLogger("monitors.snapshot")
    old = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        assert snapshot.git_revision(root, digest="x") == (None, False)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    assert any("cannot read the git revision" in r.getMessage() for r in records)
