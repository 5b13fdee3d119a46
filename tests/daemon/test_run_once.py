"""``run --once``: polls every monitor at once and imports only what its monitors need."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from reconciler.daemon import evaluator, options
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.conftest import Repo
from tests.factories import monitor, monitor_yaml
from tests.helpers import FakeClock, Recorder

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import gc, json, sys
from reconciler.cli import main
rc = main.run(sys.argv[1:])
heavy = sorted({m.split(".")[0] for m in sys.modules}
               & {"httpx", "httpcore", "anyio", "jinja2", "apprise", "prometheus_client"})
print(json.dumps({"rc": rc, "heavy": heavy, "gc": gc.get_threshold()[0]}))
"""


WRITES = """
import collections, json, sys
from reconciler import atomic
from reconciler.cli import main
writes = collections.Counter()
write_bytes = atomic.write_bytes
def counted(path, data, **kw):
    writes[path.name] += 1
    return write_bytes(path, data, **kw)
atomic.write_bytes = counted
rc = main.run(sys.argv[1:])
print(json.dumps({"rc": rc, "writes": writes}))
"""


def run_once(repo: Repo, driver: str = DRIVER) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", driver, "--root", str(repo.root), "--state-dir",
         str(repo.state), "--device", "test", "run", "--once", "--wait", "20s"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_run_once_of_command_monitors_imports_no_http_or_template_library(
        repo: Repo) -> None:
    # (and collects cyclic garbage rarely: a one-shot process, see options.one_shot_gc)
    value = repo.root / "value.txt"
    value.write_text("a\n")
    for i in range(3):
        repo.write(f"monitors.d/c{i}.yml", monitor_yaml(f"c{i}", f"[cat, {value}]",
                                                        interval="1h"))
    first, log = run_once(repo)
    assert first == {"rc": 0, "heavy": [], "gc": options.ONE_SHOT_GC_THRESHOLD}, log
    assert all(f"polled c{i}" in log for i in range(3))
    value.write_text("b\n")  # a fire renders its notify message: Jinja2 is needed now
    second, log = run_once(repo)
    assert second["rc"] == 0 and "NOTIFY c0: c0 saw b" in log
    assert second["heavy"] == ["jinja2"]


def test_run_once_writes_the_registry_and_the_heartbeats_once_at_stop(repo: Repo) -> None:
    # Every atomic write counted by file name: running.json once (at stop), the
    # aggregate liveness.json once (the closing flush), and a monitor's own
    # liveness.json only when its error line changed, not after each first check.
    repo.write("monitors.d/ok.yml", monitor_yaml("ok", "[echo, hi]", interval="1h"))
    repo.write("monitors.d/bad.yml", monitor_yaml("bad", "[/no/such/program]",
                                                  interval="1h"))
    for _ in range(2):  # a first run, then one with a state directory in use
        result, log = run_once(repo, WRITES)
        assert result["rc"] == 0, log
        assert "polled ok" in log and "poll failed: bad" in log
        writes = result["writes"]
        assert isinstance(writes, dict)
        assert writes.get("running.json") == 1, writes
        assert writes.get("liveness.json") in (2, 1), writes  # bad's own file: 1st run only
    assert not (repo.state / "monitors" / "ok" / "liveness.json").exists()
    own = json.loads((repo.state / "monitors" / "bad" / "liveness.json").read_text())
    assert "No such file" in own["lastError"]
    registry = json.loads((repo.state / "running.json").read_text())
    assert registry["daemon"]["running"] is False and set(registry["monitors"]) == {"ok", "bad"}
    beats = json.loads((repo.state / "liveness.json").read_text())["monitors"]
    assert beats["ok"]["checkCount"] == 2 and beats["bad"]["consecutiveErrors"] == 2


def test_without_a_first_poll_rate_every_started_monitor_polls_at_once(
        tmp_path: Path) -> None:
    # ``run --once`` builds its engine without the start-up spread: on a clock that
    # never moves, every first poll still happens (with the spread, few would).
    names = [f"m{i}" for i in range(40)]

    async def first_polls(rate: float | None) -> int:
        store = store_mod.Store(tmp_path / f"state-{rate}")
        ctx = SourceContext.create(store=store)
        engine = evaluator.Engine(store, Recorder(), ctx=ctx, clock=FakeClock(),
                                  flush_interval=0, first_poll_rate=rate)
        try:
            for name in names:
                await engine.start(monitor({"type": "poll", "command": ["true"],
                                            "interval": "1h"}, name=name))
            done = await engine.wait_first_poll(names, 2.0)
            return sum(r is not None for r in done.values())
        finally:
            await engine.close()
            await ctx.aclose()

    assert asyncio.run(first_polls(None)) == len(names)
    assert asyncio.run(first_polls(evaluator.FIRST_POLL_RATE)) < len(names) // 2
