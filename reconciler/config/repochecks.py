"""Repository-level lint checks that look past single files: entries in a layer that
are never read, local modifications of the pull-only ``system/`` layer, and device
names that the fleet file does not list. Reads files only; never writes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from reconciler import errors
from reconciler.config import files, yamlload
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
        except FileNotFoundError:
            continue
        except OSError as e:
            out.append(P.warning(files.display(Path(layer)), 1, 1, "",
                                 f"cannot list the layer: {e.strerror or e}", "ignored-path"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            what = _ignored(entry, overlays)
            if what:
                out.append(P.warning(files.display(Path(entry.path)), 1, 1, "", what,
                                     "ignored-path"))
    return out


def _ignored(entry: os.DirEntry[str], overlays: Path) -> str | None:
    """Why the loader skips ``entry`` in silence, or None when it reads it (or reports it
    itself: an entry it cannot stat is its ``unreadable`` error)."""
    yaml_named = entry.name.endswith(files.SUFFIXES)
    try:
        if entry.is_dir():
            if Path(entry.path).resolve() == overlays:
                return None
            return ("a directory named like a monitor file" if yaml_named else
                    "a sub-directory: monitors in it are not read (only files directly "
                    "in the layer are); move them up")
        if not yaml_named or entry.is_file():
            return None
        if not entry.is_symlink():
            return "not a regular file: it is not read"
        target = os.stat(entry.path)  # raises when dangling
    except FileNotFoundError:
        return "a dangling symlink (its target does not exist): it is not read"
    except OSError:
        return None  # the loader reads it and reports why it cannot
    return f"a symlink to {_kind(target.st_mode)}, not a regular file: it is not read"


def _kind(mode: int) -> str:
    """What a non-regular file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "something other than a regular file"


def system_modified(settings: Settings) -> list[Problem]:
    """Errors (rule ``system-modified``) for local changes to the pulled ``system/`` layer.

    Nothing to compare before the first pull (no ``system/.upstream.json``): then the
    record module (and the writer it imports) is not even imported, which keeps ``lint``
    fast."""
    if not (settings.system_dir / ".upstream.json").is_file():
        return []
    from reconciler.config import systemrecord

    found: list[Problem] = systemrecord.modification_problems(settings)
    return found


def unknown_devices(settings: Settings, monitors: Mapping[MonitorName, Monitor], *,
                    positions: Mapping[Path, Mapping[str, tuple[int, int]]] | None = None,
                    ) -> list[Problem]:
    """Warnings (rule ``unknown-device``) for device sources and owner pins naming a
    device that ``fleet.yaml`` does not list, at the offending node: the file's
    ``source.device``, ``device`` or ``devices[i]``, or the pin of the overlay that
    placed it. Without a fleet file the fleet is this device alone: a pin to any other
    name is reported, and so is every ``device`` source (its address can only come from
    the fleet file); this device's own name is always known. ``positions`` (the
    loader's ``LoadResult.positions``) spares reading a monitor file again for them."""
    if not monitors:
        return []
    known_at = positions or {}
    cwd = Path.cwd()  # once: ``display`` would ask the OS for it per problem

    def at(path: Path, node: tuple[str | int, ...], message: str) -> Problem:
        return _at(path, node, message, known_at.get(path), cwd)

    from reconciler.sources import device as device_source  # here: loaded when used

    wanted = [m for m in monitors.values()
              if isinstance(m.source, device_source.DeviceSpec) or m.device or m.devices]
    if not wanted:
        return []
    from reconciler import fleet as fleet_file

    try:
        fleet = fleet_file.load(settings.fleet_file)
    except errors.ConfigError:
        return []  # lint reports the fleet file's own problems (settings_check)
    listed = {d.name for d in fleet.devices}
    known = listed | {settings.device}
    fleet_shown = files.display(settings.fleet_file, cwd)
    out: list[Problem] = []
    for m in sorted(wanted, key=lambda m: m.name):
        if isinstance(m.source, device_source.DeviceSpec) and m.source.device not in listed:
            where = "the fleet file lists no such device" if fleet.exists else (
                f"there is no fleet file ({fleet_shown}) to give its "
                "address")
            out.append(at(m.origin, ("source", "device"),
                           f"device {m.source.device!r}: {where}"))
        if not fleet.exists:
            # no fleet file: the fleet is this device alone, so a pin elsewhere runs nowhere
            for d in (m.device, *m.devices):
                if d and d != settings.device:
                    pinned = m.overlay if m.overlay is not None and _pins(m.overlay) else None
                    node: tuple[str | int, ...] = ("device",) if d == m.device else (
                        "devices", m.devices.index(d))
                    out.append(at(pinned or m.origin,
                                   (("pin",) if pinned else ()) + node,
                                   f"device {d!r}: there is no fleet file "
                                   f"({fleet_shown}), so only this "
                                   f"device ({settings.device}) exists; unless {d!r} runs "
                                   f"this repository, nothing evaluates this monitor"))
            continue
        pinned_by = m.overlay if m.overlay is not None and _pins(m.overlay) else None
        base: tuple[str, ...] = ("pin",) if pinned_by else ()
        origin = pinned_by or m.origin
        if m.device and m.device not in known:
            out.append(at(origin, (*base, "device"),
                           f"device {m.device!r} is not in the fleet file: nothing will "
                           f"evaluate this monitor"))
        missing = [(i, d) for i, d in enumerate(m.devices) if d not in known]
        for i, d in missing:
            rest = "no listed device is in it: nothing will evaluate this monitor" if len(
                missing) == len(m.devices) else "that device never evaluates this monitor"
            out.append(at(origin, (*base, "devices", i),
                           f"device {d!r} is not in the fleet file; {rest}"))
    return out


def owners_problems(settings: Settings, monitors: Mapping[MonitorName, Monitor], *,
                    positions: Mapping[Path, Mapping[str, tuple[int, int]]] | None = None,
                    ) -> list[Problem]:
    """Errors for monitors naming failover owners (``owners:``) that could never run:
    rule ``owners-without-etcd`` when ``monitors.toml`` has no ``[etcd]`` (no device
    could take the lease), at the ``owners`` list; rule ``owners-unpolled`` when the
    source is a stream or a push source (only a poll is admitted by the lease), at
    ``source.type``."""
    owned = sorted((m for m in monitors.values() if m.owners), key=lambda m: m.name)
    if not owned:
        return []
    from reconciler.sources import registry as source_types  # here: loaded when used

    no_etcd = not settings.section("etcd")
    out: list[Problem] = []
    for m in owned:
        file = files.display(m.origin)
        known = (positions or {}).get(m.origin) or {}
        doc = None
        if no_etcd:
            found = known.get("owners.0")
            if found is None:
                doc, _ = yamlload.load(m.origin, file=file)
                found = doc.position(("owners", 0)) if doc is not None else (1, 1)
            out.append(P.error(file, found[0], found[1], "owners",
                               "owners needs [etcd] in monitors.toml (endpoints of the etcd "
                               "cluster that holds the leases); without it no device runs "
                               "this monitor", "owners-without-etcd"))
        if source_types.is_stream(m) or source_types.is_pushed(m):
            if doc is None:
                doc, _ = yamlload.load(m.origin, file=file)
            found = doc.position(("source", "type")) if doc is not None else (1, 1)
            out.append(P.error(file, found[0], found[1], "source.type",
                               f"a {m.source_type} source is not polled, and owners (failover "
                               "on an etcd lease) admits only polls: it would never fire; "
                               "use a polled source or device/devices", "owners-unpolled"))
    return out


def _pins(overlay: Path) -> bool:
    doc, _ = yamlload.load(overlay, file=files.display(overlay))
    return doc is not None and isinstance(doc.data, dict) and "pin" in doc.data


def _at(path: Path, node: tuple[str | int, ...], message: str,
        known: Mapping[str, tuple[int, int]] | None = None, cwd: Path | None = None
        ) -> Problem:
    """A warning at ``node`` of ``path``: at its position in ``known`` (the loader's),
    else read from the file (1:1 when the file no longer parses). ``cwd``: see
    ``files.display``."""
    file = files.display(path, cwd)
    found = None if known is None else known.get(P.dotted(node))
    if found is None:
        doc, _ = yamlload.load(path, file=file)
        found = doc.position(node) if doc is not None else (1, 1)
    return P.warning(file, found[0], found[1], P.dotted(node), message, "unknown-device")
