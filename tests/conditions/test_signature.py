"""Signatures and summaries: they agree on a trailing newline, and a signature stored with
its newline by an older version does not fire after an upgrade."""

from __future__ import annotations

import pytest

from reconciler import conditions
from reconciler.model import Observation
from tests.factories import monitor

SRC = {"type": "poll", "command": "true", "interval": "30s"}


@pytest.mark.parametrize("cond", [None, {"mode": "every"}, {"mode": "match", "match": "done"}])
def test_signature_and_summary_agree_on_a_trailing_newline(cond: dict[str, str] | None
                                                           ) -> None:
    m = monitor(SRC, condition=cond)
    d = conditions.decide(m, Observation("done\n"), None)
    assert d.signature == "done" and d.summary == "done"


def test_a_signature_stored_with_its_newline_does_not_fire_after_upgrade() -> None:
    m = monitor(SRC)
    old = {"fingerprint": m.fingerprint, "mode": "on-change", "baseline": "done\n",
           "lastSignature": "done\n"}
    d = conditions.decide(m, Observation("done\n"), old)
    assert not d.fire and d.reason == "unchanged" and d.persist
    assert d.state["lastSignature"] == "done"
    again = conditions.decide(m, Observation("done\n"), d.state)
    assert not again.fire and not again.persist
    assert conditions.decide(m, Observation("other\n"), d.state).fire
    mm = monitor(SRC, condition={"mode": "match", "match": "fail"})
    prev = {"fingerprint": mm.fingerprint, "mode": "match", "matching": True,
            "lastSignature": "fail 1\n"}
    d2 = conditions.decide(mm, Observation("fail 1\n"), prev)
    assert not d2.fire and d2.persist and d2.state["lastSignature"] == "fail 1"
