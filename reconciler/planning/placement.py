"""Placement: which device evaluates and fires a monitor (DESIGN.md §1 Placement).

One pure function, ``owner_decision``, decides it for every caller (plan, list,
the daemon, ``layers``). The rules, in order:

===================================  =============================================
monitor                              runs on
===================================  =============================================
``device: X`` (file or pin overlay)  X only (the owner)
``devices: [A, B]``                  each listed device, independently
``owners: [A, B, C]``                each listed device stands by; the one holding
                                     the monitor's etcd lease evaluates and fires
                                     it (``daemon.leases``)
unpinned user monitor                every device
unpinned system built-in,            every device
``sharedInput: false``
unpinned system built-in             one resolved owner: the fleet's interactive
(``sharedInput`` unset or true)      host, else the sole device of a one-device
                                     fleet, else nowhere
===================================  =============================================

Without a fleet file at all, the fleet is this device alone, so an unpinned
built-in runs here. No I/O: the fleet is passed in (``fleet.load``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler import fleet as fleet_mod
from reconciler.model import Monitor, Scope


@dataclass(frozen=True)
class Placement:
    """The placement decision for one monitor on one device.

    Attributes:
        runs_here: this device evaluates and fires the monitor.
        owner: the single owning device when there is one (a ``device`` pin or
            a resolved shared-input owner); None for "every device", an
            allowlist, or "nowhere".
        reason: one human line saying why, shown by plan, list and layers.
    """

    runs_here: bool
    owner: str | None
    reason: str


def owner_decision(monitor: Monitor, *, device: str, fleet: fleet_mod.Fleet) -> Placement:
    """Decide whether ``monitor`` runs on ``device`` (rules in the module docstring).

    Args:
        monitor: a resolved monitor; its ``device``/``devices`` already carry any
            pin overlay. Pause and ``enabled`` are not placement and are ignored.
        device: this device's name.
        fleet: the fleet file's content; ``fleet.exists`` False means no file,
            which is treated as a fleet of this device alone.

    Returns:
        A ``Placement``; never raises.
    """
    if monitor.device:
        owner = str(monitor.device)
        here = owner == device
        return Placement(here, owner, f"pinned to {owner}")
    if monitor.owners:
        listed = ", ".join(monitor.owners)
        if device in monitor.owners:
            return Placement(True, None, f"failover owners ({listed}): runs here while "
                             "this device holds the etcd lease")
        return Placement(False, None, f"failover owners exclude this device ({listed})")
    if monitor.devices:
        listed = ", ".join(monitor.devices)
        if device in monitor.devices:
            return Placement(True, None, f"allowlist includes this device ({listed})")
        return Placement(False, None, f"allowlist excludes this device ({listed})")
    if monitor.scope is not Scope.SYSTEM:
        return Placement(True, None, "unpinned user monitor: runs everywhere")
    if monitor.shared_input is False:
        return Placement(True, None, "built-in with sharedInput: false: runs everywhere")
    if not fleet.exists:
        return Placement(
            True, device, "shared-input built-in: no fleet file, this device is the whole fleet"
        )
    interactive = fleet.interactive
    if interactive is not None:
        owner = str(interactive.name)
        return Placement(
            owner == device, owner, f"shared-input built-in: owner is the interactive host {owner}"
        )
    if len(fleet.devices) == 1:
        owner = str(fleet.devices[0].name)
        return Placement(
            owner == device, owner, "shared-input built-in: sole device of a one-device fleet"
        )
    if not fleet.devices:
        return Placement(False, None, "shared-input built-in: the fleet file lists no device: "
                         "runs nowhere")
    return Placement(
        False, None, "shared-input built-in: no interactive host in a multi-device fleet: "
        "runs nowhere"
    )
