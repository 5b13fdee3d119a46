"""``/metrics``: the exposition parses, carries the issue's families with their labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.conftest import wait_for
from tests.server.conftest import Peer, free_port


def families(p: Peer) -> dict[str, object]:
    answer = p.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(answer.text)}


def test_metrics_expose_polls_fires_states_and_histograms(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[date, +%N]", "bad": "[/nonexistent/monitors-cmd]"})
    wait_for(lambda: len(p.fires("tick")) >= 1, what="a fire", log=p.log)
    wait_for(lambda: p.liveness("bad").get("checkCount"), what="bad polled", log=p.log)
    fams = families(p)
    polls = {(s.labels["monitor"], s.labels["kind"]): s.value
             for s in fams["monitors_polls"].samples if s.name == "monitors_polls_total"}
    assert polls[("tick", "poll")] >= 2
    errors = {s.labels["monitor"]: s for s in fams["monitors_check_errors"].samples
              if s.name.endswith("_total")}
    assert errors["bad"].value >= 1 and errors["bad"].labels["kind"]
    wait_for(lambda: any(s.labels.get("outcome") == "succeeded"
                         for s in families(p)["monitors_fires"].samples),
             what="a finished fire", log=p.log)
    fams = families(p)
    states = {s.labels["state"]: s.value for s in fams["monitors_monitors"].samples}
    assert set(states) == {"running", "paused", "held", "error", "completed"}
    assert states["running"] == 1 and states["error"] == 1  # tick runs, bad fails
    for name in ("monitors_poll_lateness_seconds", "monitors_poll_duration_seconds",
                 "monitors_dispatch_latency_seconds", "monitors_reconcile_duration_seconds"):
        assert fams[name].type == "histogram", name
        count = [s.value for s in fams[name].samples if s.name == name + "_count"]
        assert count and count[0] >= 1, name
    reconciles = {s.labels["result"]: s.value for s in fams["monitors_reconciles"].samples
                  if s.name.endswith("_total")}
    assert reconciles.get("changed", 0) >= 1
    samples = {s.name: s for f in fams.values() for s in f.samples}
    assert samples["monitors_applied_revision_info"].labels["generation"] == "1"
    assert samples["monitors_build_info"].labels["version"]


def test_check_errors_observed_as_observations_are_counted_too(peers) -> None:
    # onError: observe (poll-http's default) turns a refused connection into an
    # observation; it is still a failed check, so it must count in check_errors.
    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.d/down.yml", f"""\
name: down
source: {{type: poll-http, url: "http://127.0.0.1:{free_port()}/", interval: 1s}}
condition: {{mode: match, match: '^error: '}}
action: {{type: notify}}
""")
    p.start()
    p.wait_polled("down")
    errors = {(s.labels["monitor"], s.labels["kind"]): s.value
              for s in families(p)["monitors_check_errors"].samples
              if s.name.endswith("_total")}
    assert errors.get(("down", "connect"), 0) >= 1, errors
