"""Watchers that end themselves, with the real daemon: ``stopWhen`` completes a monitor
after the matching observation's own fire; it stops polling, shows as completed in list,
view, plan and --json, and stays completed across a restart until its file changes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


def test_stop_when_completes_the_monitor_and_it_stays_completed(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    pr = repo.root / "pr-state.txt"
    pr.write_text("open\n")
    repo.write("monitors.d/pr-42.yml", f"""
        name: pr-42
        source: {{type: poll, command: [cat, "{pr}"], interval: 500ms}}
        stopWhen: 'merged|closed'
        action: {{type: notify}}
    """)
    d = daemons().start()
    wait_for(lambda: d.state("pr-42").get("baseline") == "open", what="baseline", log=d.log)
    pr.write_text("merged\n")
    wait_for(lambda: "pr-42: completed (stopWhen matched 'merged')" in d.log_text(),
             what="completion", log=d.log)
    assert [f["event"]["event"] for f in d.fires("pr-42")] == ["merged"]  # its own fire
    record = json.loads((repo.state / "monitors" / "pr-42" / "lifecycle.json").read_text())
    assert record["completed"]["reason"] == "stopWhen matched 'merged'"
    checks = d.liveness("pr-42").get("checkCount")
    pr.write_text("closed\n")
    d.cli("apply")  # a reconcile now: the completed monitor is stopped, not restarted
    listed = d.cli("list")
    assert "completed (stopWhen matched 'merged')" in listed.stdout, listed.stdout
    rows = json.loads(d.cli("list", "--json").stdout)
    [row] = [r for r in rows["monitors"] if r["name"] == "pr-42"]
    assert row["status"] == "completed (stopWhen matched 'merged')"
    assert "completed (stopWhen matched 'merged')" in d.cli("view", "pr-42").stdout
    assert d.stop() == 0
    assert len(d.fires("pr-42")) == 1
    assert (d.liveness("pr-42").get("checkCount") or 0) <= (checks or 0) + 1

    # a restart keeps it completed; plan says so
    d2 = daemons(log_name="daemon-2.log").start()
    assert "completed (stopWhen matched 'merged')" in d2.cli("plan").stdout
    assert "pr-42" not in d2.running()
    assert d2.stop() == 0

    # lint says the file remains (info, exit 0); remove --completed removes it
    lint = d2.cli("lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert ("info: pr-42 completed (stopWhen matched 'merged'); its file remains "
            "(`monitors remove --completed` removes it) [completed]") in lint.stdout
    removed = d2.cli("remove", "--completed")
    assert removed.returncode == 0, removed.stderr
    assert "removed pr-42 (completed: stopWhen matched 'merged')" in removed.stdout
    assert not (repo.user / "pr-42.yml").exists()
    assert "[completed]" not in d2.cli("lint").stdout


def test_stop_after_and_until_complete_in_the_engine(tmp_path: Any) -> None:
    """In-process on a fake clock: ``stopAfter: {fires: 2}`` parks after the second fire;
    ``until: 10m`` (from the recorded first start) parks at the first check past it."""
    import asyncio

    from reconciler.daemon import evaluator
    from reconciler.sources.context import SourceContext
    from reconciler.state import store as store_mod
    from tests.factories import monitor
    from tests.helpers import FakeClock, Recorder, until

    store = store_mod.Store(tmp_path / "state")
    clock = FakeClock()
    fired = Recorder()
    twice = monitor({"type": "poll", "command": ["true"], "interval": "1m"},
                    condition={"mode": "every"}, name="twice", stopAfter={"fires": 2})
    brief = monitor({"type": "poll", "command": ["true"], "interval": "1m"},
                    name="brief", until="10m")

    async def go() -> dict[str, str]:
        ctx = SourceContext.create(store=store)
        engine = evaluator.Engine(store, fired, ctx=ctx, clock=clock, flush_interval=0)
        try:
            await engine.start(twice)
            await engine.start(brief)
            async with clock.driving(step=1.0, pause=0.001):
                await until(lambda: len(engine.parked) == 2, timeout=30)
            return dict(engine.parked)
        finally:
            await engine.close()
            await ctx.aclose()

    parked = asyncio.run(go())
    assert parked == {"twice": "completed (stopAfter: 2 fires)",
                      "brief": "completed (until 2025-06-15T15:16:40Z)"}
    assert [e.monitor for e in fired.events] == ["twice", "twice"]
    record = store.lifecycle("brief") or {}
    assert record["startedAt"] == 1_750_000_000.0
