"""A template that never finishes rendering is cut by its budget: it starves no other
monitor in the engine, and neither wedges the real daemon nor its SIGTERM."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

from reconciler.actions import dispatch, options
from reconciler.daemon import evaluator
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor
from tests.helpers import until

SPINNER = "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}done"


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


def test_freezing_template_neither_wedges_the_daemon_nor_sigterm(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/spin.yml", f"""
        source: {{type: poll, command: [echo, x], interval: 1s}}
        condition: {{mode: every}}
        action: {{type: notify, message: "{SPINNER}"}}
    """)
    repo.write("monitors.d/tick.yml", """
        source: {type: poll, command: [date, +%s%N], interval: 1s}
        action: {type: notify}
    """)
    d = daemons().start()
    wait_for(lambda: any(f.get("status") == "failed" for f in d.fires("spin")),
             what="a failed spin fire", log=d.log)
    before = d.liveness("tick").get("checkCount", 0)
    wait_for(lambda: d.liveness("tick").get("checkCount", 0) >= before + 3,
             what="tick keeps polling", log=d.log)
    failed = next(f for f in d.fires("spin") if f.get("status") == "failed")
    assert "template: render budget exceeded" in json.dumps(failed)
    started = time.monotonic()
    assert d.stop(signal.SIGTERM, timeout=30) == 0
    assert time.monotonic() - started < 30
