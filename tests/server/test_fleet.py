"""Three real daemons on loopback ports as one fleet: list fan-out, unreachable peers,
add's duplicate check on peers, plan --device, the device source, tokenEnv."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Repo
from tests.daemon.conftest import wait_for
from tests.server.conftest import TOKEN, Peer


def write_fleet(repo: Repo, *peers: Peer, token_env: dict[str, str] | None = None) -> None:
    lines = ["devices:"]
    for p in peers:
        lines.append(f"  - name: {p.device}")
        lines.append(f"    address: '{p.address}'")
        if token_env and p.device in token_env:
            lines.append(f"    tokenEnv: {token_env[p.device]}")
    repo.write("fleet.yaml", "\n".join(lines) + "\n")


@pytest.fixture
def fleet3(peers) -> tuple[Peer, Peer, Peer]:
    a: Peer = peers("alpha", monitors={"on-alpha": "[echo, a]"})
    b: Peer = peers("beta", monitors={"on-beta": "[echo, b]"})
    c: Peer = peers("gamma", monitors={"on-gamma": "[echo, c]"})
    for p in (a, b, c):
        write_fleet(p.repo, a, b, c)
    return a, b, c


def test_list_fans_out_and_tags_rows_with_their_device(fleet3) -> None:
    a, _b, _c = fleet3
    result = a.cli("list", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert sorted((r["device"], r["name"]) for r in doc["monitors"]) == [
        ("alpha", "on-alpha"), ("beta", "on-beta"), ("gamma", "on-gamma")]
    assert doc["unreachable"] == []
    assert doc["devices"] == ["alpha", "beta", "gamma"]
    text = a.cli("list")
    assert text.returncode == 0
    assert "DEVICE" in text.stdout.splitlines()[0] and "on-gamma" in text.stdout
    local = json.loads(a.cli("list", "--local", "--json").stdout)
    assert [(r["device"], r["name"]) for r in local["monitors"]] == [("alpha", "on-alpha")]
    assert local["unreachable"] == [] and local["devices"] == ["alpha"]
    assert "DEVICE" not in a.cli("list", "--local").stdout


def test_a_stopped_peer_is_named_unreachable_and_the_answer_is_incomplete(fleet3) -> None:
    a, _b, c = fleet3
    c.stop()
    result = a.cli("list", "--json")
    assert result.returncode == 4
    doc = json.loads(result.stdout)
    assert [u["device"] for u in doc["unreachable"]] == ["gamma"]
    assert "cannot connect" in doc["unreachable"][0]["error"]
    assert sorted(r["device"] for r in doc["monitors"]) == ["alpha", "beta"]
    text = a.cli("list")
    assert text.returncode == 4
    assert "UNREACHABLE gamma: cannot connect" in text.stdout
    assert "incomplete" in text.stdout


def test_a_wrong_token_makes_a_peer_unreachable_with_401(fleet3) -> None:
    a, b, c = fleet3
    write_fleet(a.repo, a, b, c, token_env={"beta": "BETA_TOKEN"})
    a.env["BETA_TOKEN"] = "not-" + TOKEN
    doc = json.loads(a.cli("list", "--json").stdout)
    assert doc["unreachable"] == [{"device": "beta", "error":
                                   "HTTP 401: unauthorized: missing or wrong bearer token"}]
    a.env["BETA_TOKEN"] = TOKEN
    assert json.loads(a.cli("list", "--json").stdout)["unreachable"] == []


def test_add_refuses_a_duplicate_that_runs_on_a_peer(fleet3) -> None:
    a, b, c = fleet3
    assert b.cli("add", "original", "--poll", "echo q", "1m", "--notify").returncode == 0
    result = a.cli("add", "copy", "--poll", "echo q", "1m", "--notify")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "'original' on beta" in result.stderr
    assert not (a.repo.user / "copy.yml").exists()
    c.stop()
    fine = a.cli("add", "other", "--poll", "[echo, z]", "1s", "--notify")
    assert fine.returncode == 0, fine.stderr
    assert "could not consult gamma (cannot connect" in fine.stderr


def test_plan_device_plans_this_tree_against_the_peers_running_state(fleet3) -> None:
    a, _b, _c = fleet3
    result = a.cli("plan", "--device", "beta", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["device"] == "beta"
    actions = {ch["name"]: ch["action"] for ch in plan["changes"]}
    assert actions == {"on-alpha": "start", "on-beta": "stop"}
    text = a.cli("plan", "--device", "beta")
    assert "on-beta" in text.stdout
    unknown = a.cli("plan", "--device", "nope")
    assert unknown.returncode == 1 and "no such device" in unknown.stderr


def test_the_device_source_probes_a_peers_healthz(peers) -> None:
    b: Peer = peers("beta")
    a: Peer = peers("alpha", start=False)
    a.repo.write("monitors.d/watch-beta.yml", """
        name: watch-beta
        source:
          type: device
          device: beta
          interval: 1s
        action:
          type: notify
          channel: log
        """)
    a.repo.write("fleet.yaml", f"devices:\n  - name: alpha\n  - name: beta\n"
                 f"    address: '{b.address}'\n")
    a.start()
    state = wait_for(lambda: a.state("watch-beta"), what="the baseline", log=a.log)
    assert "reachable\\nheadroom: " in json.dumps(state)
    assert "headroom: unknown" not in json.dumps(state).replace("\\n", " ")  # from /healthz
    b.stop()
    fire = wait_for(lambda: a.fires("watch-beta"), what="a fire on beta going down",
                    log=a.log)
    assert "unreachable" in json.dumps(fire[0])
