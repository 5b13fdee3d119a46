"""``GET /metrics``: the Prometheus text exposition of ``daemon.metrics.REGISTRY`` (token).

Besides the counters and histograms the engine feeds, two families are computed
at scrape time from the daemon's state (``StateCollector``):

* ``monitors_monitors{state}``: monitors by state: ``running`` (evaluated now),
  ``paused`` (a pause overlay, ``enabled: false`` or a rate-limit auto-pause),
  ``held`` (a stop held by the mass-stop guard), ``error`` (parked: a permanent
  check error, or failing its last checks), ``completed`` (a completed lifecycle);
* ``monitors_applied_revision_info{commit, dirty, generation}``: what the daemon
  runs (``commit`` "" outside git).

Exposition format: https://prometheus.io/docs/instrumenting/exposition_formats/
"""

from __future__ import annotations

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
    """Monitors by state and the applied revision, read from ``daemon`` at scrape time."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[GaugeMetricFamily | InfoMetricFamily]:
        """The two families (module docstring)."""
        counts = dict.fromkeys(STATES, 0)
        daemon = self.daemon
        reg = daemon.registry
        parts = daemon.parts
        parked = parts.engine.parked if parts is not None else {}
        failing = 0
        for name in reg.entries:
            if name in parked:
                counts["error"] += 1
                continue
            live = parts.store.liveness(name) if parts is not None else None
            if live and live.get("consecutiveErrors"):
                failing += 1
            counts["running"] += 1
        counts["error"] += failing
        counts["running"] -= failing
        counts["held"] = len(reg.held)
        plan = daemon.reconciler.last.plan
        if plan is not None:
            for exclusion in plan.excluded.values():
                if exclusion.kind in PAUSED:
                    counts["paused"] += 1
                elif exclusion.kind == "completed":
                    counts["completed"] += 1
        gauge = GaugeMetricFamily("monitors_monitors", "Monitors on this device by state.",
                                  labels=["state"])
        for state in STATES:
            gauge.add_metric([state], counts[state])
        yield gauge
        info = InfoMetricFamily("monitors_applied_revision",
                                "The revision of the layers the daemon applied.")
        info.add_metric([], {"commit": reg.commit or "", "dirty": str(reg.dirty).lower(),
                             "generation": str(reg.generation)})
        yield info


_attached: set[int] = set()


def attach(daemon: Daemon) -> None:
    """Register ``StateCollector(daemon)`` on the registry once, and the build info."""
    if id(daemon) in _attached:
        return
    _attached.add(id(daemon))
    metrics_mod.REGISTRY.register(StateCollector(daemon))
    metrics_mod.build_info()


async def exposition(request: web.Request) -> web.StreamResponse:
    """The text exposition (version 0.0.4)."""
    ctx = context(request)
    attach(ctx.daemon)
    body = generate_latest(metrics_mod.REGISTRY)
    return web.Response(body=ctx.redactor.redact(body.decode()).encode(),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


ROUTES = (Route("GET", "/metrics", exposition),)
