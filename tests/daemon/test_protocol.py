"""The control protocol's typed requests: the wire objects they encode to and decode from."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from reconciler.daemon import protocol
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, raw_request
from tests.factories import monitor_yaml

REQUESTS: list[protocol.Request] = [
    protocol.Status(),
    protocol.Reconcile(wait=2.5, names=("a", "b"), allow_mass_stop=True),
    protocol.FirstPolls(names=("a",), wait=1.0),
    protocol.EvaluateNow(names=None),
    protocol.EvaluateNow(names=()),
    protocol.ClearAutopause(name="a"),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: r.op)
def test_every_request_survives_the_wire(request_: protocol.Request) -> None:
    wire = json.loads(json.dumps(protocol.encode(request_)))
    assert wire["op"] == request_.op
    assert protocol.decode(wire) == request_


def test_the_wire_keys_are_the_documented_ones() -> None:
    assert protocol.encode(protocol.Reconcile(names=("a",))) == {
        "op": "reconcile", "wait": 0.0, "names": ["a"], "allowMassStop": False}
    assert protocol.encode(protocol.EvaluateNow()) == {
        "op": "evaluate-now", "wait": 0.0, "names": None}


def test_absent_and_null_fields_take_the_defaults() -> None:
    assert protocol.decode({"op": "reconcile"}) == protocol.Reconcile()
    assert protocol.decode({"op": "reconcile", "wait": None, "names": None}) == \
        protocol.Reconcile()
    assert protocol.decode({"op": "first-polls", "extra": 1}) == protocol.FirstPolls()


@pytest.mark.parametrize(("wire", "error"), [
    ({"op": "first-polls", "wait": 1e12}, protocol.WAIT_TOO_LONG),
    ({"op": "evaluate-now", "wait": "1s"}, protocol.WAIT_ERROR),
    ({"op": "reconcile", "allowMassStop": "yes"}, "allowMassStop: expected true or false"),
    ({"op": "clear-autopause", "name": ""}, "name: expected a monitor name"),
    ({"op": "restart"}, "unknown op 'restart' (status, reconcile, first-polls, evaluate-now, "
                        "clear-autopause)"),
])
def test_a_bad_request_is_one_line(wire: dict[str, object], error: str) -> None:
    with pytest.raises(protocol.BadRequest) as e:
        protocol.decode(wire)
    assert str(e.value) == error


def test_control_api_checks_request_arguments(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s"))
    d = daemons().start()
    bad = {
        b'{"op": "reconcile", "wait": "x"}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": -1}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": NaN}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": true}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "names": "tick"}': "names: expected a list of monitor names",
        b'{"op": "reconcile", "allowMassStop": "yes"}': "allowMassStop: expected true or false",
        b'{"op": "evaluate-now", "names": [1]}': "names: expected a list of monitor names",
        b'{"op": "reconcile", "wait": 1e300}': "wait: at most 315360000 seconds (3650d)",
        b'{"op": "first-polls", "wait": 1e300}': "wait: at most 315360000 seconds (3650d)",
        b'{"op": "first-polls", "names": "tick"}': "names: expected a list of monitor names",
        b'{"op": "clear-autopause"}': "name: expected a monitor name",
    }
    for line, error in bad.items():
        assert raw_request(repo.state, line) == {"ok": False, "error": error}, line
    ok = raw_request(repo.state, b'{"op": "reconcile", "wait": 0.5, "names": ["tick"]}')
    assert ok["ok"] is True and ok["firstPolls"]["tick"]["status"] in ("ok", "pending")
    polls = raw_request(repo.state, b'{"op": "first-polls", "wait": 5, "names": ["tick", "nope"]}')
    assert polls == {"ok": True, "firstPolls": {"tick": {"status": "ok", "error": None}}}
    assert "ValueError" not in d.log_text()
