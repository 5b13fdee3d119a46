"""The daemon's Prometheus metrics: cheap hooks for the engine, families built at scrape time.

The engine, the dispatcher and the reconciler call the hooks below: each is a dict
lookup and an increment or one histogram observation in plain Python counts (a dict
of ints, ``_Buckets``), no I/O, no lock and no allocation on the hot path. One
collector turns the counts into the Prometheus families when ``registry()`` is
scraped: the client library's ``Histogram.observe`` took a lock per bucket it
incremented, about 15% of the engine's CPU at 10,000 polls a second
(``bench/engine_scale.py --only idle``), and importing ``prometheus_client``
costs a one-shot run (``monitors run --once``, which never serves HTTP) about
15 ms, so it is imported by the first ``registry()`` call only (``server.metrics``).
The hooks are called on the event loop thread only.
Gauges that describe the current state (monitors by state, the applied revision)
are computed at scrape time by the HTTP server (``server.metrics``), so they cost
nothing between scrapes.

Names follow the Prometheus conventions (https://prometheus.io/docs/practices/naming/):
the ``monitors_`` prefix, base units (seconds), ``_total`` on counters (added by
the client library), ``_info`` on info metrics.

Series of monitors that are gone (``forget``): a family labelled by ``monitor`` keeps a
series per monitor it has seen, so a long-lived daemon whose monitors come and go
(agents arming monitors over MCP, git mode) would export ever more series, and
dashboards would show monitors that no longer exist. As the client library guidelines
and kube-state-metrics do (a child is removed when what it describes is gone), the
reconciler (``daemon.reconcile``) calls ``forget`` with the monitors that left this
device's layers: a removed file, the old name of a rename, or a paused, completed or
disabled monitor whose file was then removed. Kept, because the monitor still exists and
its counters are its history:

* a **replaced** monitor (a changed definition under the same name): the same monitor
  (its fires and state are kept under that name too); its polls continue its count
  (a changed source type starts a series of its own, ``polls``);
* a **paused**, **disabled**, **auto-paused** or **completed** monitor, or one placed on
  another device (``elsewhere``): still known here (``list`` shows it, it may run again;
  ``monitors_monitors{state}`` counts it); its series stop growing and are forgotten when
  its file goes.

So the per-monitor series are bounded by the monitors the layers define. A fire still
running when its monitor leaves (a ``run`` action outlives its evaluator's stop) counts
its outcome when it ends: the reconciler forgets the departed names again at each
reconcile until no fire is in flight.
"""

from __future__ import annotations

import bisect
import datetime as dt
import time
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import HistogramMetricFamily, Metric

    from reconciler.events import Event
    from reconciler.model import Monitor

LATENESS_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0, 30.0)
"""Poll lateness is milliseconds when the daemon is healthy: buckets down to 0.5 ms (a
1-5 ms bucket made every p99 under 5 ms read as about 5 ms)."""
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _Buckets:
    """A histogram's counts: one per upper bound (``le``, inclusive) and one past the
    last, plus the sum of what was observed; cumulated only at scrape time."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` (seconds) in the first bucket whose bound is >= it."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        """The Prometheus histogram: cumulative ``_bucket`` series, ``_count``, ``_sum``."""
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        buckets, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            buckets.append((floatToGoString(bound), running))  # type: ignore[no-untyped-call]
        return HistogramMetricFamily(name, documentation, buckets=buckets,
                                     sum_value=self.total)


_Key = TypeVar("_Key", bound=tuple[str, ...])


def _drop(values: dict[_Key, Any], at: int, monitors: Collection[str]) -> None:
    """Delete the keys of ``values`` whose label at index ``at`` is in ``monitors``, in
    place (the collector copies a dict before reading it: ``forget``)."""
    for key in [key for key in values if key[at] in monitors]:
        del values[key]


class _Labelled:
    """A counter or gauge family by label values: ``values[(label, ...)]`` is its value."""

    __slots__ = ("documentation", "labels", "name", "values")

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = list(labels)
        self.values: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str) -> None:
        """Add one to the series of ``labels``."""
        self.values[labels] = self.values.get(labels, 0.0) + 1.0

    def forget(self, monitors: Collection[str]) -> None:
        """Remove the series whose ``monitor`` label is in ``monitors``."""
        if "monitor" in self.labels:
            _drop(self.values, self.labels.index("monitor"), monitors)


class _Polls:
    """``monitors_polls``: ``counts[(monitor, kind)]`` is a one-item list the hook
    increments in place, ``latest[monitor]`` the (kind, list) of the monitor's last
    check (a changed kind starts a new series): one dict lookup per poll."""

    __slots__ = ("counts", "latest")
    labels = ("monitor", "kind")

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], list[int]] = {}
        self.latest: dict[str, tuple[str, list[int]]] = {}

    def forget(self, monitors: Collection[str]) -> None:
        """Remove the series of ``monitors`` (and their entries in ``latest``, so a
        monitor of that name counts from zero again)."""
        for monitor in monitors:
            self.latest.pop(monitor, None)
        _drop(self.counts, 0, monitors)


_bisect_left = bisect.bisect_left
_POLL_LATENESS = _Buckets(LATENESS_BUCKETS)
_POLL_DURATION = _Buckets(DURATION_BUCKETS)
_DISPATCH_LATENCY = _Buckets(DURATION_BUCKETS)
_RECONCILE_DURATION = _Buckets(DURATION_BUCKETS)
_POLLS = _Polls()
_polls = _POLLS.latest  # the hook's names for them (module globals: one lookup less)
_kinds = _POLLS.counts

_CHECK_ERRORS = _Labelled("monitors_check_errors", "Failed checks, by monitor and error "
                          "kind (timeout, exit, config, ...).", ["monitor", "kind"])
_FIRES = _Labelled("monitors_fires", "Fires, by monitor and outcome (succeeded, failed, "
                   "skipped, interrupted).", ["monitor", "outcome"])
_RECONCILES = _Labelled("monitors_reconciles", "Reconciles, by result (changed, unchanged, "
                        "error).", ["result"])
_DELIVERIES = _Labelled("monitors_webhook_deliveries", "Webhook deliveries, by provider and "
                        "outcome (accepted, replayed, unsigned, bad-signature, unknown-secret, "
                        "stale, too-large, unknown-monitor, bad-delivery-id, unwritable).",
                        ["provider", "outcome"])
_FENCED = _Labelled("monitors_fenced", "Fires of owners: monitors refused by the fencing "
                    "check (stale token, or etcd unreachable), by monitor.", ["monitor"])
_COUNTERS = (_CHECK_ERRORS, _FIRES, _RECONCILES, _DELIVERIES, _FENCED)
_ETCD_UP = _Labelled("monitors_etcd_up", "1 while etcd answers this daemon (failover owners: "
                     "[etcd] set), 0 while it does not: owners: monitors fire nowhere then.",
                     [])
_ETCD_UP.values[()] = 0.0
_OWNER_HOLDER = _Labelled("monitors_owner_holder", "1 while this device holds the etcd key "
                          "of the owners: monitor (it polls and fires), 0 while it stands by.",
                          ["monitor"])
_GAUGES = (_ETCD_UP, _OWNER_HOLDER)
_BY_MONITOR = tuple(f for f in (*_COUNTERS, *_GAUGES, _POLLS) if "monitor" in f.labels)
"""Every family labelled by ``monitor`` (``forget``)."""
_build: dict[str, str] = {}
"""``monitors_build_info``'s labels (``build_info``)."""


class _Collector:
    """Every family of this module, from the counts the hooks keep."""

    def collect(self) -> Iterator[Metric]:
        """The families (read on the scraping thread; the counts are copied first).

        Each dict is copied with ``dict.copy``, which allocates once and then copies in
        C, never ``list(d.items())``: that allocates an item per series, and an
        allocation can run the garbage collector, whose finalizers are Python code
        during which the loop thread may take the interpreter lock and add a series
        (a first poll): "dictionary changed size during iteration", a 500.
        """
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            InfoMetricFamily,
        )

        for counter in _COUNTERS:
            family = CounterMetricFamily(counter.name, counter.documentation,
                                         labels=counter.labels)
            for labels, value in counter.values.copy().items():
                family.add_metric(list(labels), value)
            yield family
        yield _DISPATCH_LATENCY.family("monitors_dispatch_latency_seconds",
                                       "Seconds from a firing decision to the end of its action.")
        yield _RECONCILE_DURATION.family("monitors_reconcile_duration_seconds",
                                         "Seconds one reconcile took (load, plan, apply).")
        for gauge in _GAUGES:
            g = GaugeMetricFamily(gauge.name, gauge.documentation, labels=gauge.labels)
            for labels, value in gauge.values.copy().items():
                g.add_metric(list(labels), value)
            yield g
        info = InfoMetricFamily("monitors_build", "The monitors version this daemon runs.")
        info.add_metric([], dict(_build))
        yield info
        polls = CounterMetricFamily("monitors_polls", "Checks of a monitor's source, by "
                                    "monitor and source kind.", labels=["monitor", "kind"])
        for (monitor, kind), count in _kinds.copy().items():
            polls.add_metric([monitor, kind], count[0])
        yield polls
        yield _POLL_LATENESS.family("monitors_poll_lateness_seconds",
                                    "Seconds a poll started after its scheduled time.")
        yield _POLL_DURATION.family("monitors_poll_duration_seconds", "Seconds a source "
                                    "took to produce an observation or a check error.")


_registry: CollectorRegistry | None = None


def registry() -> CollectorRegistry:
    """The daemon's own Prometheus registry (never the process-wide default one of
    ``prometheus_client``), created and imported on the first call: every family of
    this module, plus what ``server.metrics`` registers."""
    global _registry
    if _registry is None:
        from prometheus_client import CollectorRegistry

        _registry = CollectorRegistry(auto_describe=True)
        _registry.register(_Collector())
    return _registry


def build_info() -> None:
    """Set ``monitors_build_info`` (version, Python) once."""
    import platform
    from importlib import metadata

    try:
        version = metadata.version("monitors")
    except metadata.PackageNotFoundError:
        version = "unknown"
    _build.update({"version": version, "python": platform.python_version()})


def poll_started(lateness: float) -> None:
    """A scheduled poll started ``lateness`` seconds after its due time."""
    late = _POLL_LATENESS  # ``_Buckets.observe`` inline: the hooks run on every poll
    late.counts[_bisect_left(late.bounds, lateness)] += 1
    late.total += lateness


def polled(monitor: str, kind: str, duration: float) -> None:
    """A check of ``monitor`` (source type ``kind``) ended after ``duration`` seconds."""
    series = _polls.get(monitor)
    if series is None or series[0] != kind:
        count = _kinds.setdefault((monitor, kind), [0])
        series = _polls[monitor] = (kind, count)
    series[1][0] += 1
    took = _POLL_DURATION
    took.counts[_bisect_left(took.bounds, duration)] += 1
    took.total += duration


def check_failed(monitor: str, kind: str) -> None:
    """A check of ``monitor`` failed with an error of ``kind`` (``SourceError.kind``)."""
    _CHECK_ERRORS.inc(monitor, kind)


def fired(monitor: str, outcome: str, latency: float | None) -> None:
    """A fire of ``monitor`` ended with ``outcome``, ``latency`` seconds after the decision."""
    _FIRES.inc(monitor, outcome)
    if latency is not None:
        _DISPATCH_LATENCY.observe(latency)


def fire_finished(monitor: Monitor, event: Event, status: object) -> None:
    """The dispatcher's ``on_finish``: ``fired`` with the latency since ``event.fired_at``."""
    try:
        at = dt.datetime.fromisoformat(event.fired_at.replace("Z", "+00:00")).timestamp()
        latency: float | None = max(0.0, time.time() - at)
    except (ValueError, AttributeError):
        latency = None
    fired(monitor.name, str(status), latency)


def delivery(provider: str, outcome: str) -> None:
    """Count one webhook delivery's outcome (``daemon.deliveries``, ``server.hooks``)."""
    _DELIVERIES.inc(provider, outcome)


def fenced(monitor: str) -> None:
    """A fire of the ``owners:`` monitor ``monitor`` was refused by the fencing check."""
    _FENCED.inc(monitor)


def etcd_reachable(up: bool) -> None:
    """etcd answered (``True``) or did not (``False``) the last request of the leases."""
    _ETCD_UP.values[()] = 1.0 if up else 0.0


def holding(monitor: str, held: bool) -> None:
    """This device holds (``True``) or stands by for (``False``) ``monitor``'s etcd key."""
    _OWNER_HOLDER.values[(monitor,)] = 1.0 if held else 0.0


def forget(monitors: Collection[str]) -> None:
    """Remove the series of ``monitors`` (names) from every family labelled by
    ``monitor``: they are gone from this device's layers (module docstring says which
    stops forget and which keep). A monitor of such a name that comes back counts from
    zero, as after a restart.

    Called on the event loop thread, as the hooks are. A scrape renders in a worker
    thread meanwhile (``server.metrics``): ``_Collector`` copies each dict (``d.copy()``,
    which runs no Python code once it started) before reading it, and this only
    deletes keys in place, so the scrape sees each family before or after, never a dict
    changing under its iteration.
    """
    names = frozenset(monitors)
    if names:
        for family in _BY_MONITOR:
            family.forget(names)


def reconciled(duration: float, result: str) -> None:
    """A reconcile took ``duration`` seconds and ended ``changed``, ``unchanged`` or ``error``."""
    _RECONCILE_DURATION.observe(duration)
    _RECONCILES.inc(result)

