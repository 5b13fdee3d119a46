"""daemon.metrics: the per-poll hooks expose the same Prometheus families they feed."""

from __future__ import annotations

import gc
import itertools
import sys
import threading

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reconciler.daemon import metrics


def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(metrics.registry()).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_poll_hooks_expose_counts_and_cumulative_buckets() -> None:
    before = samples()

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return samples()[key] - before.get(key, 0.0)

    for lateness in (0.0005, 0.001, 0.003, 2.0, 99.0):
        metrics.poll_started(lateness)
    metrics.polled("hooks-a", "poll", 0.02)
    metrics.polled("hooks-a", "poll", 0.2)
    metrics.polled("hooks-a", "file", 0.001)  # a changed kind: a series of its own

    late = "monitors_poll_lateness_seconds"
    assert delta(late + "_bucket", le="0.001") == 2  # le is inclusive
    assert delta(late + "_bucket", le="0.005") == 3
    assert delta(late + "_bucket", le="2.5") == 4
    assert delta(late + "_bucket", le="30.0") == 4
    assert delta(late + "_bucket", le="+Inf") == 5
    assert delta(late + "_count") == 5
    assert abs(delta(late + "_sum") - 101.0045) < 1e-9
    dur = "monitors_poll_duration_seconds"
    assert delta(dur + "_bucket", le="0.005") == 1 and delta(dur + "_bucket", le="0.025") == 2
    assert delta(dur + "_count") == 3
    assert delta("monitors_polls_total", monitor="hooks-a", kind="poll") == 2
    assert delta("monitors_polls_total", monitor="hooks-a", kind="file") == 1


def feed(monitor: str) -> None:
    """One series of ``monitor`` in every family labelled by monitor."""
    metrics.polled(monitor, "poll", 0.01)
    metrics.polled(monitor, "file", 0.01)  # two kinds: two series
    metrics.check_failed(monitor, "timeout")
    metrics.fired(monitor, "succeeded", 0.5)
    metrics.fenced(monitor)
    metrics.holding(monitor, True)


def series_of(monitor: str) -> set[str]:
    return {name for name, labels in samples() if ("monitor", monitor) in labels}


def test_forget_removes_every_series_of_the_monitors_and_only_theirs() -> None:
    feed("forget-gone")
    feed("forget-kept")
    assert series_of("forget-gone") == {
        "monitors_polls_total", "monitors_check_errors_total", "monitors_fires_total",
        "monitors_fenced_total", "monitors_owner_holder"}
    before = samples()
    metrics.forget(["forget-gone"])
    after = samples()
    assert series_of("forget-gone") == set()  # every family labelled by monitor, new ones too
    kept = {k: v for k, v in before.items() if ("monitor", "forget-gone") not in k[1]}
    unchanged = {k: v for k, v in after.items() if k in kept}
    assert unchanged == kept  # the others' series, histograms and counters as they were
    metrics.forget(["forget-gone", "never-seen"])  # twice, or unknown: nothing to do


def test_a_forgotten_monitor_that_comes_back_counts_from_zero() -> None:
    feed("forget-back")
    metrics.forget({"forget-back"})
    metrics.polled("forget-back", "poll", 0.01)  # the hook's cache of its series is gone too
    metrics.check_failed("forget-back", "exit")
    now = samples()
    assert now[("monitors_polls_total", (("kind", "poll"), ("monitor", "forget-back")))] == 1
    assert ("monitors_polls_total", (("kind", "file"), ("monitor", "forget-back"))) not in now
    assert series_of("forget-back") == {"monitors_polls_total", "monitors_check_errors_total"}


def test_forget_while_a_scrape_renders_in_another_thread() -> None:
    # /metrics renders in a worker thread (server.metrics) while the loop thread forgets:
    # a collector iterating a dict that changes under it raises RuntimeError. A tiny
    # switch interval makes the threads interleave inside every family's loop.
    failures: list[BaseException] = []
    done = threading.Event()

    def scrape() -> None:
        while not done.is_set():
            try:
                generate_latest(metrics.registry())
            except BaseException as e:
                failures.append(e)
                return

    metrics.registry()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        for round_ in range(150):
            names = [f"race-{round_}-{i}" for i in range(40)]
            for name in names:
                feed(name)
            metrics.forget(names)
            if failures:
                break
    finally:
        done.set()
        scraper.join(timeout=30)
        sys.setswitchinterval(interval)
    assert not failures, repr(failures[0])
    assert not any(name.startswith("race-") for _, labels in samples() for _, name in labels)


def test_a_scrape_survives_a_series_added_while_it_copies_a_family() -> None:
    # The scrape's copy of a family's dict allocates an object per series; with the
    # collector due, CPython 3.11 collects right there, and the finalizers it runs
    # (asyncio's weak task set, __del__) are Python code during which the loop thread can
    # take the interpreter lock and add a series (the first polls of 1,000 monitors while
    # /metrics was scraped: one 500 "RuntimeError", dictionary changed size during
    # iteration). A finalizer adding a series at every collection stands for that thread.
    grown = itertools.count()
    stop = False

    class Adds:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

        def __del__(self) -> None:
            if not stop:
                metrics.polled(f"gc-grow-{next(grown)}", "file", 0.0)
                metrics.check_failed(f"gc-grow-{next(grown)}", "exit")
                Adds()  # garbage again: the next collection adds another

    for i in range(50):
        feed(f"gc-base-{i}")
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    try:
        Adds()
        text = generate_latest(metrics.registry()).decode()
    finally:
        stop = True
        gc.set_threshold(*threshold)
        gc.collect()
    assert 'monitor="gc-base-49"' in text
    metrics.forget([f"gc-grow-{i}" for i in range(next(grown))]
                   + [f"gc-base-{i}" for i in range(50)])
