"""Check errors in the engine: a bad URL is parked with one line and no traceback, a shell
that cannot start its command counts as consecutive check errors."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from reconciler.daemon import evaluator
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.factories import monitor
from tests.helpers import FakeClock, Recorder, until


def test_bad_url_is_parked_with_one_line_and_no_traceback(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = store_mod.Store(tmp_path / "state")
    urls = {"port": "http://127.0.0.1:99999/", "bracket": "http://[::1"}

    async def go() -> dict[str, str]:
        ctx = SourceContext.create(store=store)
        engine = evaluator.Engine(store, Recorder(), ctx=ctx, flush_interval=0.1)
        try:
            for name, url in urls.items():
                await engine.start(monitor({"type": "poll-http", "url": url,
                                            "interval": "500ms"}, name=name))
            await engine.wait_first_poll(list(urls), 10)
            return dict(engine.parked)
        finally:
            await engine.close()
            await ctx.aclose()

    with caplog.at_level(logging.DEBUG):
        parked = asyncio.run(go())
    assert parked["port"].startswith("url: ") and "99999" in parked["port"]
    assert parked["bracket"].startswith("url: ")
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert (store.liveness("port") or {})["checkCount"] == 1  # parked: not polled again


def test_missing_shell_command_counts_consecutive_errors(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path / "state")
    m = monitor({"type": "poll", "command": "does-not-exist-xyz a", "interval": "500ms"},
                name="gone")

    async def go() -> None:
        ctx = SourceContext.create(store=store)
        clock = FakeClock()  # the 500ms intervals pass in virtual time
        engine = evaluator.Engine(store, Recorder(), ctx=ctx, flush_interval=0.1, clock=clock)
        try:
            async with clock.driving():
                await engine.start(m)
                await until(
                    lambda: (store.liveness("gone") or {}).get("consecutiveErrors", 0) >= 3)
        finally:
            await engine.close()
            await ctx.aclose()

    asyncio.run(go())
    live = store.liveness("gone") or {}
    assert live["lastError"].startswith("spawn: command could not start (sh exit 127")
