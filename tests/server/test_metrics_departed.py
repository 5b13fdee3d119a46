"""``/metrics`` forgets the series of a monitor that left the layers, keeps the others'.

Real daemons (``peers``): files are deleted, edited, paused; the exposition is parsed
with prometheus-client's parser. Which stops forget and which keep: ``daemon.metrics``.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.daemon.conftest import wait_for
from tests.factories import monitor_yaml
from tests.server.conftest import Peer


def series(p: Peer) -> dict[tuple[str, str, str], float]:
    """(sample name, monitor, second label value) -> value, of the samples with a
    ``monitor`` label (the exposition is rendered at most once a second)."""
    answer = p.get("/metrics")
    assert answer.status_code == 200
    out = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            if "monitor" in s.labels:
                other = [v for k, v in sorted(s.labels.items()) if k != "monitor"]
                out[(s.name, s.labels["monitor"], "".join(other))] = s.value
    return out


def of(found: dict[tuple[str, str, str], float], monitor: str) -> dict[tuple[str, str], float]:
    return {(name, label): v for (name, m, label), v in found.items() if m == monitor}


def polls(p: Peer, monitor: str) -> float:
    return of(series(p), monitor).get(("monitors_polls_total", "poll"), 0.0)


def test_a_removed_monitors_series_go_the_others_stay_a_replaced_one_keeps_its_counts(
        peers) -> None:
    p: Peer = peers("alpha", monitors={"stay": "[date, +%N]", "gone": "[date, +%N]",
                                       "edited": "[date, +%N]"})
    p.repo.write("monitors.d/failing.yml", monitor_yaml("failing", "[/nonexistent/monitors]"))
    wait_for(lambda: ("monitors_fires_total", "succeeded") in of(series(p), "gone")
             and polls(p, "edited") >= 4
             and ("monitors_check_errors_total", "spawn") in of(series(p), "failing"),
             what="polls, fires and check errors counted", log=p.log)
    edited_before = polls(p, "edited")
    fingerprint = p.running()["edited"]["fingerprint"]

    (p.repo.root / "monitors.d" / "gone.yml").unlink()
    (p.repo.root / "monitors.d" / "failing.yml").unlink()
    p.repo.write("monitors.d/edited.yml", monitor_yaml("edited", "[date, +%s%N]"))
    wait_for(lambda: set(p.running()) == {"stay", "edited"}
             and p.running()["edited"]["fingerprint"] != fingerprint,
             what="gone and failing stopped, edited replaced", log=p.log)
    found = wait_for(lambda: (lambda s: s if not of(s, "gone") and not of(s, "failing")
                              else None)(series(p)),
                     what="the removed monitors' series gone", log=p.log)
    assert ("monitors_polls_total", "poll") in of(found, "stay")
    assert ("monitors_fires_total", "succeeded") in of(found, "stay")
    # replaced, not forgotten: its count goes on from where it was (a reset starts at 1)
    assert of(found, "edited")[("monitors_polls_total", "poll")] >= edited_before


def test_a_paused_or_completed_monitor_keeps_its_series_until_its_file_goes(peers) -> None:
    p: Peer = peers("alpha", monitors={"paused": "[date, +%N]"})
    p.repo.write("monitors.d/once.yml", monitor_yaml("once", "[date, +%N]",
                                                     extra="stopAfter: {fires: 1}\n"))
    wait_for(lambda: polls(p, "paused") >= 1 and of(series(p), "once").get(
             ("monitors_fires_total", "succeeded")), what="both polled, once fired",
             log=p.log)
    r = p.cli("pause", "paused", "--reason", "quiet")
    assert r.returncode == 0, r.stdout + r.stderr
    wait_for(lambda: not set(p.running()) & {"paused", "once"},
             what="paused and once (completed) stopped", log=p.log)
    kept = series(p)
    assert ("monitors_polls_total", "poll") in of(kept, "paused")
    assert ("monitors_fires_total", "succeeded") in of(kept, "once")

    overlays = list((p.repo.root / "monitors.d" / "overlays").iterdir())
    for path in [p.repo.root / "monitors.d" / "paused.yml",
                 p.repo.root / "monitors.d" / "once.yml", *overlays]:
        path.unlink()
    wait_for(lambda: (lambda s: not of(s, "paused") and not of(s, "once"))(series(p)),
             what="their series gone with their files", log=p.log)


def test_a_fire_that_ends_after_its_monitor_left_is_forgotten_too(peers, tmp_path: Path
                                                                   ) -> None:
    # a run action outlives its evaluator's stop: its outcome is counted when it ends,
    # after the reconcile that forgot the monitor; a later reconcile forgets it again
    value, go = tmp_path / "value.txt", tmp_path / "go"
    value.write_text("v0\n")
    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.d/slow.yml", f"""\
source: {{type: poll, command: [cat, {value}], interval: 500ms}}
action:
  type: run
  command: [sh, -c, 'while [ ! -e {go} ]; do sleep 0.05; done']
  prompt: ''
""")
    p.start()
    wait_for(lambda: p.state("slow").get("baseline"), what="a baseline", log=p.log)
    value.write_text("v1\n")
    wait_for(lambda: p.fires("slow"), what="a fire in flight", log=p.log)
    (p.repo.root / "monitors.d" / "slow.yml").unlink()
    wait_for(lambda: "slow" not in p.running(), what="slow stopped", log=p.log)
    go.touch()
    wait_for(lambda: [f.get("status") for f in p.fires("slow")] == ["succeeded"],
             what="the run ended", log=p.log)
    wait_for(lambda: not of(series(p), "slow"), what="its series forgotten", log=p.log)
