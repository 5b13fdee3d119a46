"""API v1 on a real daemon: every answer carries apiVersion, rows equal `list --json`'s."""

from __future__ import annotations

import json

from tests.server.conftest import Peer


def test_v1_status_is_the_control_socket_status_with_the_bound_address(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]"})
    answer = p.get("/v1/status")
    assert answer.status_code == 200
    doc = answer.json()
    assert doc["apiVersion"] == "v1"
    assert doc["device"] == "alpha"
    assert doc["running"] == ["tick"]
    assert doc["revision"] == {"commit": None, "dirty": False}
    assert doc["endpoints"]["http"] == f"http://127.0.0.1:{p.port}"


def test_v1_monitors_are_the_rows_of_list_json(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]", "tock": "[echo, ho]"})
    p.wait_polled("tick")
    doc = p.get("/v1/monitors").json()
    assert doc["apiVersion"] == "v1"
    listed = json.loads(p.cli("list", "--local", "--json").stdout)
    assert [r["name"] for r in doc["monitors"]] == ["tick", "tock"]
    assert [r["fingerprint"] for r in doc["monitors"]] == \
        [r["fingerprint"] for r in listed["monitors"]]
    assert doc["monitors"][0]["status"] == "running"


def test_v1_monitor_view_runs_and_fingerprints(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[date, +%N]"})
    p.wait_polled("tick")
    view = p.get("/v1/monitors/tick").json()
    assert view["monitor"]["name"] == "tick"
    assert view["monitor"]["config"]["source"]["type"] == "poll"
    assert p.get("/v1/monitors/nope").status_code == 404
    assert "nope" in p.get("/v1/monitors/nope").json()["error"]
    runs = p.get("/v1/monitors/tick/runs?limit=5").json()
    assert runs["monitor"] == "tick" and isinstance(runs["runs"], list)
    assert p.get("/v1/monitors/tick/runs?limit=x").status_code == 400
    prints = p.get("/v1/fingerprints").json()["fingerprints"]
    assert [f["name"] for f in prints] == ["tick"]
    assert prints[0]["fingerprint"].startswith("sha256:")


def test_a_name_that_cannot_be_a_monitor_is_404_not_a_daemon_fault(peers) -> None:
    # '../x' and 'a/b' are refused by the state store's path check; that is the
    # client's unknown name (404), not the daemon's files failing (503).
    p: Peer = peers("alpha", monitors={"tick": "[date, +%N]"})
    for path in ("/v1/monitors/..%2Fx/runs", "/v1/monitors/a%2Fb/runs",
                 "/v1/monitors/..%2Fx", "/v1/monitors/.hidden/runs"):
        answer = p.get(path)
        assert answer.status_code == 404, (path, answer.text)
        assert "no monitor named" in answer.json()["error"], answer.text


def test_v1_plan_diffs_a_desired_set_against_the_running_one(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]"})
    running = p.post("/v1/plan", json={"monitors": []}).json()
    assert running["running"][0]["name"] == "tick"
    same = p.post("/v1/plan", json={"monitors": running["running"]}).json()
    assert same["plan"]["summary"].startswith("No changes")
    gone = p.post("/v1/plan", json={"monitors": []}).json()
    assert [c["action"] for c in gone["plan"]["changes"]] == ["stop"]
    assert p.post("/v1/plan", json={"monitors": [{"name": "x"}]}).status_code == 400
    assert p.post("/v1/plan", content=b"{not json").status_code == 400


def test_secrets_never_reach_an_answer(peers) -> None:
    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.d/sec.yml", """
        name: sec
        source:
          type: poll
          command: [echo, "${API_SECRET}"]
          interval: 1s
        action:
          type: notify
          channel: log
        """)
    p.env["API_SECRET"] = "hunter2-very-secret"
    p.start()
    p.wait_polled("sec")
    for path in ("/v1/monitors", "/v1/monitors/sec", "/v1/status", "/metrics", "/healthz"):
        body = p.get(path).text
        assert "hunter2-very-secret" not in body, path
        assert "test-token-0123456789abcdef" not in body, path
