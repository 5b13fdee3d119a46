"""The owner table of DESIGN.md §1 Placement, one row per rule."""

from __future__ import annotations

import pytest

from reconciler import fleet
from reconciler.model import DeviceName, Monitor, Scope
from reconciler.planning import placement
from tests.factories import monitor

BASE = {"source": {"type": "poll", "command": "true", "interval": "30s"},
        "action": {"type": "notify"}}


def mon(scope: Scope = Scope.USER, **extra: object) -> Monitor:
    return monitor(**{**BASE, **extra}, name="m", scope=scope)


def fl(*devices: tuple[str, bool]) -> fleet.Fleet:
    return fleet.Fleet(
        devices=tuple(fleet.Device(DeviceName(n), None, i) for n, i in devices), exists=True
    )


NO_FLEET = fleet.Fleet()
TWO_WITH_HOST = fl(("laptop", True), ("build-box-1", False))
TWO_NO_HOST = fl(("a", False), ("b", False))
ONE = fl(("solo", False))
SYS = Scope.SYSTEM

TABLE = [
    # monitor, this device, fleet -> runs_here, owner, reason fragment
    (mon(device="build-box-1"), "build-box-1", TWO_WITH_HOST, True, "build-box-1",
     "pinned to build-box-1"),
    (mon(device="build-box-1"), "laptop", TWO_WITH_HOST, False, "build-box-1",
     "pinned to build-box-1"),
    (mon(SYS, device="build-box-1"), "laptop", TWO_WITH_HOST, False, "build-box-1", "pinned"),
    (mon(devices=["a", "b"]), "a", TWO_NO_HOST, True, None, "allowlist includes this device"),
    (mon(devices=["a"]), "b", TWO_NO_HOST, False, None, "allowlist excludes this device"),
    (mon(SYS, devices=["a", "b"]), "b", TWO_NO_HOST, True, None, "allowlist includes"),
    (mon(owners=["a", "b"]), "b", TWO_NO_HOST, True, None,
     "failover owners (a, b): runs here while this device holds the etcd lease"),
    (mon(SYS, owners=["a"]), "b", TWO_NO_HOST, False, None,
     "failover owners exclude this device (a)"),
    (mon(), "anything", TWO_NO_HOST, True, None, "unpinned user monitor: runs everywhere"),
    (mon(), "anything", NO_FLEET, True, None, "unpinned user monitor: runs everywhere"),
    (mon(sharedInput=True), "b", TWO_NO_HOST, True, None, "unpinned user monitor"),
    (mon(SYS, sharedInput=False), "b", TWO_NO_HOST, True, None, "sharedInput: false"),
    (mon(SYS), "laptop", TWO_WITH_HOST, True, "laptop",
     "shared-input built-in: owner is the interactive host laptop"),
    (mon(SYS), "build-box-1", TWO_WITH_HOST, False, "laptop", "interactive host laptop"),
    (mon(SYS, sharedInput=True), "build-box-1", TWO_WITH_HOST, False, "laptop", "interactive"),
    (mon(SYS), "solo", ONE, True, "solo", "sole device of a one-device fleet"),
    (mon(SYS), "other", ONE, False, "solo", "sole device of a one-device fleet"),
    (mon(SYS), "a", TWO_NO_HOST, False, None,
     "no interactive host in a multi-device fleet: runs nowhere"),
    (mon(SYS), "b", TWO_NO_HOST, False, None, "runs nowhere"),
    (mon(SYS), "here", NO_FLEET, True, "here", "no fleet file"),
    (mon(SYS), "here", fl(), False, None, "runs nowhere"),
]


@pytest.mark.parametrize(("monitor", "device", "the_fleet", "runs_here", "owner", "reason"), TABLE)
def test_owner_table(monitor: Monitor, device: str, the_fleet: fleet.Fleet, runs_here: bool,
                     owner: str | None, reason: str) -> None:
    got = placement.owner_decision(monitor, device=device, fleet=the_fleet)
    assert (got.runs_here, got.owner) == (runs_here, owner), got
    assert reason in got.reason


def test_pause_is_not_placement() -> None:
    from reconciler.model import Pause

    m = monitor(**BASE, name="m", scope=SYS, pause=Pause(reason="x"))
    assert placement.owner_decision(m, device="solo", fleet=ONE).runs_here


def test_pin_overlay_replaces_file_placement() -> None:
    m = monitor(**BASE, device="a", name="m", pin={"devices": ["b"]})
    got = placement.owner_decision(m, device="b", fleet=TWO_NO_HOST)
    assert got.runs_here and "allowlist" in got.reason
