"""Repository-level lint checks that look past single files: entries in a layer that
are never read, local modifications of the pull-only ``system/`` layer, and device
names that the fleet file does not list. Reads files only; never writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from reconciler import errors
from reconciler.config import loader
from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.model import Monitor, MonitorName
from reconciler.settings import Settings


def ignored_entries(settings: Settings) -> list[Problem]:
    """Warnings (rule ``ignored-path``) for what a layer holds but the loader never reads.

    The loader reads ``*.yml``/``*.yaml`` regular files directly in ``system/``,
    ``monitors.d/`` and ``monitors.d/overlays/``. A sub-directory (other than the
    overlays directory), a dangling symlink or a directory named like a YAML file
    would otherwise be skipped in silence.
    """
    out: list[Problem] = []
    overlays = settings.overlays_dir.resolve()
    for layer in (settings.system_dir, settings.user_dir, settings.overlays_dir):
        try:
            entries = sorted(os.scandir(layer), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            yaml_named = entry.name.endswith(loader.SUFFIXES)
            if entry.is_dir():
                if path.resolve() == overlays:
                    continue
                what = ("a directory named like a monitor file" if yaml_named else
                        "a sub-directory: monitors in it are not read (only files directly "
                        "in the layer are); move them up")
            elif yaml_named and not entry.is_file():
                what = ("a dangling symlink" if entry.is_symlink() else
                        "not a regular file") + ": it is not read"
            else:
                continue
            out.append(P.warning(loader.display(path), 1, 1, "", what, "ignored-path"))
    return out


def system_modified(settings: Settings) -> list[Problem]:
    """Errors (rule ``system-modified``) for local changes to the pulled ``system/`` layer."""
    from reconciler.config import gitrepo

    found: list[Problem] = gitrepo.modification_problems(settings)
    return found


def unknown_devices(settings: Settings,
                    monitors: Mapping[MonitorName, Monitor]) -> list[Problem]:
    """Warnings (rule ``unknown-device``) for device sources and owner pins naming a
    device that ``fleet.yaml`` does not list. Without a fleet file only ``device``
    sources are checked (their address can only come from the fleet file)."""
    wanted = [m for m in monitors.values()
              if m.source.get("type") == "device" or m.device or m.devices]
    if not wanted:
        return []
    from reconciler import fleet as fleet_file

    try:
        fleet = fleet_file.load(settings.fleet_file)
    except errors.ConfigError as e:
        return [P.error(loader.display(settings.fleet_file), 1, 1, "", str(e), "settings")]
    known = {d.name for d in fleet.devices}
    out: list[Problem] = []
    for m in sorted(wanted, key=lambda m: m.name):
        file = loader.display(m.origin)
        if m.source.get("type") == "device" and m.source["device"] not in known:
            where = "the fleet file lists no such device" if fleet.exists else (
                f"there is no fleet file ({loader.display(settings.fleet_file)}) to give its "
                "address")
            out.append(P.warning(file, m.line, 1, "source.device",
                                 f"device {m.source['device']!r}: {where}", "unknown-device"))
        if fleet.exists:
            for d in (m.device, *m.devices):
                if d and d not in known and d != settings.device:
                    out.append(P.warning(file, m.line, 1, "device",
                                         f"device {d!r} is not in the fleet file: nothing "
                                         f"will evaluate this monitor", "unknown-device"))
    return out
