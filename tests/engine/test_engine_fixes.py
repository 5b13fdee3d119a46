"""Engine-level regressions: first-check liveness on disk, bad URLs parked without a
traceback, shell start failures counted as check errors, a freezing template that
cannot starve other monitors; plus ``monitors test`` for the same inputs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.actions import dispatch, options
from reconciler.daemon import evaluator, polls
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.conftest import Repo, run_cli
from tests.helpers import FakeClock, Recorder, monitor, until

SPINNER = "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}done"


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


def test_freezing_template_does_not_starve_other_monitors(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = store_mod.Store(state)
    spin = monitor({"type": "poll", "command": ["echo", "x"], "interval": "500ms"},
                   name="spin", condition={"mode": "every"},
                   action={"type": "notify", "message": SPINNER})
    other = monitor({"type": "poll", "command": ["date", "+%s%N"], "interval": "500ms"},
                    name="other")

    async def go() -> None:
        ctx = SourceContext.create(store=store)
        d = dispatch.Dispatcher(store, options.parse({}), state_dir=state, environ={})
        engine = evaluator.Engine(store, d, ctx=ctx, flush_interval=0.1)
        try:
            await engine.start(spin)
            await engine.start(other)
            started = time.monotonic()
            await until(lambda: (store.liveness("other") or {}).get("checkCount", 0) >= 6,
                        timeout=30)
            await until(lambda: any(r.get("status") == "failed"
                                    for r in store.fires("spin")), timeout=30)
            assert time.monotonic() - started < 30
        finally:
            await engine.close()
            await d.close()
            await ctx.aclose()

    asyncio.run(go())
    failed = [r for r in store.fires("spin") if r.get("status") == "failed"]
    assert "template: render budget exceeded" in str(failed[0].get("reason"))


def test_cli_test_bad_url_is_one_line_exit_1(repo: Repo) -> None:
    repo.write("monitors.d/port.yml", """
        source: {type: poll-http, url: "http://127.0.0.1:99999/", interval: 30s}
        action: {type: notify}
    """)
    r = run_cli(["test", "port"], repo=repo)
    assert r.exit_code == 1, r.output
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.output
    # lint (config) or the source edge (``url:``) may refuse it: either way one line.
    assert "99999" in r.stderr and ("source check failed: url:" in r.stderr
                                    or "is invalid" in r.stderr)


def test_cli_test_freezing_template_is_a_clear_error(repo: Repo) -> None:
    repo.write("monitors.d/spin.yml", f"""
        source: {{type: poll, command: "echo x", interval: 30s}}
        condition: {{mode: every}}
        action: {{type: notify, message: "{SPINNER}"}}
    """)
    started = time.monotonic()
    r = run_cli(["test", "spin"], repo=repo)
    assert time.monotonic() - started < 60
    assert r.exit_code == 1, r.output
    assert "spin: the action would fail: template: render budget exceeded" in r.stderr
    assert "error: template: render budget exceeded" in r.stdout
    j = run_cli(["test", "spin", "--json"], repo=repo)
    assert j.exit_code == 1
    assert "render budget exceeded" in json.loads(j.stdout)["action"]["error"]
