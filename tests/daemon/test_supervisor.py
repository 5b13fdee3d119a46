"""The supervisor on the real engine and store: stop first, then start; renames carry state."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from reconciler.daemon import evaluator, supervisor
from reconciler.events import Event
from reconciler.model import Monitor, MonitorName
from reconciler.planning import desired as desired_mod
from reconciler.planning import placement
from reconciler.planning import plan as plan_mod
from reconciler.sources.context import SourceContext
from reconciler.state import registry
from reconciler.state import store as store_mod
from tests.factories import monitor


class Recorder:
    """A dispatcher that records events (the real one is tested in tests/actions)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def dispatch(self, monitor: Monitor, event: Event) -> None:
        self.events.append(event)


class OrderedEngine(evaluator.Engine):
    """The real engine, noting the order of supervisor calls."""

    calls: list[str]

    async def start(self, monitor: Monitor) -> None:
        self.calls.append(f"start {monitor.name}")
        await super().start(monitor)

    async def stop(self, name: MonitorName | str) -> None:
        self.calls.append(f"stop {name}")
        await super().stop(name)

    async def replace(self, monitor: Monitor) -> None:
        self.calls.append(f"replace {monitor.name}")
        await super().replace(monitor)


def mon(name: str, word: str) -> Monitor:
    return monitor({"type": "poll", "command": ["echo", word], "interval": "1h"}, name=name,
                   origin=f"/r/monitors.d/{name}.yml")


def plan_for(desired: list[Monitor], reg: registry.Registry) -> plan_mod.Plan:
    d = desired_mod.desired_set({m.name: m for m in desired},
                             owner=lambda _: placement.Placement(True, None, "here"))
    return plan_mod.make(d, supervisor.running_monitors(reg),
                         plan_mod.Basis(device="me", daemon_running=True,
                                        generation=reg.generation, digest=""),
                         allow_mass_stop=True)


def test_stop_first_rename_carries_state(tmp_path: Path) -> None:
    async def main() -> dict[str, Any]:
        store = store_mod.Store(tmp_path)
        ctx = SourceContext.create(store=store)
        engine = OrderedEngine(store, Recorder(), ctx=ctx)
        engine.calls = []
        reg = registry.Registry()
        sup = supervisor.Supervisor(engine, store, reg, now=lambda: "now")
        try:
            first = await sup.apply(plan_for([mon("old", "x"), mon("gone", "g"),
                                              mon("edit", "e1")], reg))
            assert sorted(first.started) == ["edit", "gone", "old"] and reg.generation == 1
            polls = await engine.wait_first_poll(["old", "gone", "edit"], 20)
            assert all(p is not None and p.ok for p in polls.values()), polls
            baseline = store.read_state("old")
            assert baseline is not None
            engine.calls.clear()
            second = await sup.apply(plan_for([mon("new", "x"), mon("edit", "e2"),
                                               mon("fresh", "f")], reg))
            polls = await engine.wait_first_poll(["new", "edit", "fresh"], 20)
            return {"calls": list(engine.calls), "second": second, "baseline": baseline,
                    "state_new": store.read_state("new"), "polls": polls,
                    "running": sorted(engine.running()), "reg": sorted(reg.entries),
                    "generation": reg.generation}
        finally:
            await engine.close()
            await ctx.aclose()

    out = asyncio.run(main())
    calls = out["calls"]
    stops = [i for i, c in enumerate(calls) if c.startswith("stop") and c != "stop edit"]
    starts = [i for i, c in enumerate(calls) if c.startswith(("start", "replace"))]
    assert max(stops) < min(starts), calls  # every stop before any start
    assert "stop gone" in calls and "stop old" in calls and "replace edit" in calls
    assert out["running"] == out["reg"] == ["edit", "fresh", "new"]
    assert out["generation"] == 2
    # the rename moved old's state (baseline) to new: no new baseline was needed
    assert out["state_new"]["baseline"] == out["baseline"]["baseline"]
    assert not (tmp_path / "monitors" / "old").exists()
    assert all(p is not None and p.ok for p in out["polls"].values())


def test_held_stops_are_not_applied(tmp_path: Path) -> None:
    async def main() -> tuple[supervisor.Applied, list[str]]:
        store = store_mod.Store(tmp_path)
        ctx = SourceContext.create(store=store)
        engine = evaluator.Engine(store, Recorder(), ctx=ctx)
        reg = registry.Registry()
        sup = supervisor.Supervisor(engine, store, reg, now=lambda: "now")
        try:
            ms = [mon(f"m{i}", str(i)) for i in range(6)]
            await sup.apply(plan_for(ms, reg))
            d = desired_mod.desired_set({m.name: m for m in [*ms[4:], mon("extra", "z")]},
                                     owner=lambda _: placement.Placement(True, None, "here"))
            plan = plan_mod.make(d, supervisor.running_monitors(reg), plan_mod.Basis(
                device="me", daemon_running=True, generation=1, digest=""))
            assert plan.mass_stop is not None
            applied = await sup.apply(plan)
            return applied, sorted(engine.running())
        finally:
            await engine.close()
            await ctx.aclose()

    applied, running = asyncio.run(main())
    assert [c.name for c in applied.held] == ["m0", "m1", "m2", "m3"]
    assert applied.started == ["extra"]  # the other changes still apply
    assert running == ["extra", "m0", "m1", "m2", "m3", "m4", "m5"]
