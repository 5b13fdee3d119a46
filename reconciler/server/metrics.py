"""``GET /metrics``: the Prometheus text exposition of ``daemon.metrics.registry()`` (token).

Besides the counters and histograms the engine feeds, two families are computed
at scrape time from the daemon's state (``StateCollector``):

* ``monitors_monitors{state}``: monitors by state: ``running`` (evaluated now),
  ``paused`` (a pause overlay, ``enabled: false`` or a rate-limit auto-pause),
  ``held`` (a stop held by the mass-stop guard), ``error`` (parked: a permanent
  check error, or failing its last checks), ``completed`` (a completed lifecycle);
* ``monitors_applied_revision_info{commit, dirty, generation}``: what the daemon
  runs (``commit`` "" outside git).

The exposition is rendered at most once a second (``Context.shared``) however many
clients scrape. Exposition format: https://prometheus.io/docs/instrumenting/exposition_formats/
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from reconciler.daemon import metrics as metrics_mod
from reconciler.server.app import Route, context

if TYPE_CHECKING:
    from reconciler.daemon.main import Daemon

STATES = ("running", "paused", "held", "error", "completed")
PAUSED = frozenset({"paused", "disabled", "autopaused"})


class StateCollector(Collector):
    """Monitors by state and the applied revision. ``refresh`` reads them from
    ``daemon`` on the event loop (the daemon's structures are the loop's); ``collect``
    yields the last reading, so the exposition can be rendered in a worker thread."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.counts: dict[str, int] = dict.fromkeys(STATES, 0)
        self.revision: dict[str, str] = {"commit": "", "dirty": "false", "generation": "0"}

    def refresh(self) -> None:
        """Count the monitors by state now (on the event loop)."""
        counts = dict.fromkeys(STATES, 0)
        daemon = self.daemon
        reg = daemon.registry
        parts = daemon.parts
        failing = (parts.store.failing().union(parts.engine.parked)
                   if parts is not None else set())
        counts["error"] = len(failing.intersection(reg.entries))
        counts["running"] = len(reg.entries) - counts["error"]
        counts["held"] = len(reg.held)
        plan = daemon.reconciler.last.plan
        if plan is not None:
            for exclusion in plan.excluded.values():
                if exclusion.kind in PAUSED:
                    counts["paused"] += 1
                elif exclusion.kind == "completed":
                    counts["completed"] += 1
        self.counts = counts
        self.revision = {"commit": reg.commit or "", "dirty": str(reg.dirty).lower(),
                         "generation": str(reg.generation)}

    def collect(self) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
        """The two families (module docstring), as of the last ``refresh``."""
        gauge = GaugeMetricFamily("monitors_monitors", "Monitors on this device by state.",
                                  labels=["state"])
        for state in STATES:
            gauge.add_metric([state], self.counts[state])
        yield gauge
        info = InfoMetricFamily("monitors_applied_revision",
                                "The revision of the layers the daemon applied.")
        info.add_metric([], dict(self.revision))
        yield info


_collectors: dict[int, StateCollector] = {}


def attach(daemon: Daemon) -> StateCollector:
    """The ``StateCollector`` of ``daemon``, registered once (with the build info)."""
    found = _collectors.get(id(daemon))
    if found is None:
        found = _collectors[id(daemon)] = StateCollector(daemon)
        metrics_mod.registry().register(found)
        metrics_mod.build_info()
    return found


async def exposition(request: web.Request) -> web.StreamResponse:
    """The text exposition (version 0.0.4)."""
    ctx = context(request)
    collector = attach(ctx.daemon)

    def render() -> bytes:
        return ctx.redactor.redact(generate_latest(metrics_mod.registry()).decode()).encode()

    async def make() -> bytes:  # rendered in a thread: the event loop keeps polling
        collector.refresh()
        return await asyncio.to_thread(render)

    body = await ctx.shared("metrics", make)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


ROUTES = (Route("GET", "/metrics", exposition),)
