"""``store.liveness_view``: how liveness reads in list/view (STALLED only for a running
evaluator)."""

from __future__ import annotations

from reconciler.state import store as store_mod
from tests.factories import monitor

SRC = {"type": "poll", "command": "true", "interval": "30s"}


def test_not_running_monitor_is_never_stalled() -> None:
    m = monitor(SRC)
    live = {"lastCheckedAt": 0.0, "checkCount": 3}
    assert store_mod.liveness_view(live, m, 1e6)["stalled"]
    view = store_mod.liveness_view(live, m, 1e6, running=False)
    assert not view["stalled"] and "STALLED" not in view["text"]
