"""Check errors as observations (``condition.onError``): stable kinds, volatile parts
stripped, the per-source-type defaults, and replay's ``error:`` steps."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.conditions import outage, replay
from reconciler.sources import registry as source_types
from tests.factories import monitor

HTTP = {"type": "poll-http", "url": "http://127.0.0.1:8080/health", "interval": "1s"}


@pytest.mark.parametrize(("kind", "stable"), [
    ("timeout", "timeout"), ("connect", "connect"), ("dns", "dns"), ("tls", "tls"),
    ("http", "http"), ("protocol", "http"), ("url", "http"), ("spawn", "spawn"),
    ("exited", "exit"), ("unreadable", "read"), ("line-too-long", "read"),
    ("select", "select"),
    ("config", None), ("state", None), ("internal", None), ("unsupported", None),
])
def test_source_kinds_map_onto_the_stable_kinds(kind: str, stable: str | None) -> None:
    assert outage.stable_kind(kind) == stable
    obs = outage.observation(outage.OBSERVE, kind, "boom")
    assert (obs is None) == (stable is None)
    if obs is not None:
        assert obs.text == f"error: {stable}: boom"
        assert obs.meta == {"error": stable}


@pytest.mark.parametrize(("a", "b"), [
    ("connect to ('10.0.0.1', 41234) refused", "connect to ('10.0.0.1', 50001) refused"),
    ("read from 10.0.0.1:41234 after 0.31s", "read from 10.0.0.1:51234 after 12.5s"),
    ("<Conn object at 0x7f3a9c2e1d90> closed", "<Conn object at 0x7f11aa00bb10> closed"),
    ("child pid 4242 exited", "child pid 17 exited"),
    ("line one\n  line two", "line one line two"),
])
def test_volatile_parts_do_not_change_the_signature(a: str, b: str) -> None:
    assert outage.stable_message(a) == outage.stable_message(b)


def test_stable_parts_are_kept_and_the_message_is_bounded() -> None:
    for text in ("GET http://h:8080/x: [Errno 111] Connection refused",
                 "GET http://127.0.0.1:8080/x: ConnectError: All connection attempts failed"):
        assert outage.stable_message(text) == text
    assert len(outage.stable_message("x" * 5000)) == outage.MESSAGE_CHARS


def test_ignore_and_permanent_errors_stay_check_errors() -> None:
    assert outage.observation(outage.IGNORE, "connect", "refused") is None
    assert outage.observation(outage.OBSERVE, "http", "bad url", permanent=True) is None


def test_defaults_per_source_type_and_explicit_values() -> None:
    assert source_types.on_error(monitor(HTTP)) == "observe"
    assert source_types.on_error(monitor()) == "ignore"  # poll
    assert source_types.on_error(monitor(condition={"onError": "observe"})) == "observe"
    assert source_types.on_error(monitor(HTTP, condition={"onError": "ignore"})) == "ignore"


def test_writing_the_default_out_keeps_the_fingerprint() -> None:
    implicit, explicit = monitor(HTTP), monitor(HTTP, condition={"onError": "observe"})
    assert implicit.fingerprint == explicit.fingerprint
    assert monitor(HTTP, condition={"onError": "ignore"}).fingerprint != implicit.fingerprint


def _replay(steps: list[Any], **condition: Any) -> list[replay.StepResult]:
    m = monitor(HTTP, condition=condition or None)
    return replay.replay(m, replay.parse(steps, file="r.yml"), on_error=source_types.on_error(m))


def test_replay_an_outage_fires_once_and_the_recovery_is_a_change() -> None:
    results = _replay(["200\nok", {"error": "connect: refused"},
                       {"error": "connect: refused"}, "200\nok"])
    assert [(r.fire, r.reason) for r in results] == [
        (False, "baseline"), (True, "changed"), (False, "unchanged"), (True, "changed")]
    assert results[1].signature == "error: connect: refused"


def test_replay_match_on_error_kind() -> None:
    results = _replay(["200\nok", {"error": "timeout: no response within 5s"},
                       {"error": "connect: refused"}, "200\nok"],
                      mode="match", match=r"^error: (timeout|connect)")
    assert [r.fire for r in results] == [False, True, True, False]


def test_replay_with_ignore_leaves_error_steps_out() -> None:
    results = _replay(["200\nok", {"error": "connect: refused"}, "200\nok"], onError="ignore")
    assert [(r.fire, r.reason) for r in results] == [
        (False, "baseline"), (False, "error"), (False, "unchanged")]
