"""Liveness on disk: the first check of a monitor reaches liveness.json at once, later
checks are coalesced into the periodic flush."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from reconciler.daemon import evaluator, polls
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.factories import monitor
from tests.helpers import FakeClock, Recorder, until


def on_disk(state: Path, name: str) -> dict[str, Any] | None:
    path = state / "monitors" / name / "liveness.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_first_check_reaches_liveness_at_once_later_checks_coalesced(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = store_mod.Store(state)
    m = monitor({"type": "poll", "command": ["echo", "a"], "interval": "500ms"}, name="live")
    bad = monitor({"type": "poll", "command": "does-not-exist-xyz", "interval": "30s"},
                  name="bad")

    async def go() -> None:
        ctx = SourceContext.create(store=store)
        # A flush interval far longer than the test: only the first-check flush writes.
        clock = FakeClock()  # the 500ms intervals pass in virtual time
        engine = evaluator.Engine(store, Recorder(), ctx=ctx, flush_interval=3600, clock=clock)
        driving = clock.driving()
        await driving.__aenter__()  # until the engine is closed
        try:
            await engine.start(m)
            await engine.start(bad)
            first = await engine.wait_first_poll(["live", "bad"], 10)
            assert first["live"] == polls.FirstPoll(True)
            assert first["bad"] is not None and not first["bad"].ok
            # What `apply` reports is what `list` reads, right away.
            assert (on_disk(state, "live") or {}).get("checkCount") == 1
            bad_live = on_disk(state, "bad") or {}
            assert bad_live.get("consecutiveErrors") == 1 and "spawn" in bad_live["lastError"]
            # Later checks stay coalesced (in memory until the periodic flush).
            await until(lambda: (store.liveness("live") or {}).get("checkCount", 0) >= 3)
            assert (on_disk(state, "live") or {}).get("checkCount") == 1
            # A replaced evaluator's first check is written at once too.
            m2 = monitor({"type": "poll", "command": ["echo", "b"], "interval": "30s"},
                         name="live")
            await engine.replace(m2)
            await engine.wait_first_poll(["live"], 10)
            count = (store.liveness("live") or {})["checkCount"]
            assert (on_disk(state, "live") or {}).get("checkCount") == count
        finally:
            await engine.close()
            await ctx.aclose()
            await driving.__aexit__(None, None, None)

    asyncio.run(go())
