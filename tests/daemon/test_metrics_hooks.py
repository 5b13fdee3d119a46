"""daemon.metrics: the per-poll hooks expose the same Prometheus families they feed."""

from __future__ import annotations

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
