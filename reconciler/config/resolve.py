"""Per-file results -> the resolved desired set: what needs more than one file.

``shadow`` lets a user monitor shadow the built-in of the same name (noting whether it
behaves the same), ``apply_overlays`` validates each overlay and patches the monitor it
names (pause, pin), ``duplicates`` finds two monitors with one fingerprint. They fill
a ``Desired`` (``loader.LoadResult``) and append problems; they read no file.

Must not: read or parse files (``monitorfile``, ``yamlload``), raise on bad input, or
print.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from reconciler.config import overlays, validate, yamlload
from reconciler.config import problems as P
from reconciler.config.files import display
from reconciler.config.monitorfile import Entry
from reconciler.config.overlays import Overlay
from reconciler.config.problems import Problem
from reconciler.model import DeviceName, Monitor, MonitorName, Scope

OverlayFile = tuple[Path, str, yamlload.Document | None, list[Problem]]
"""An overlay file as read: its path, its displayed name, its document (None when it
could not be parsed) and the problems found so far."""


@dataclass(frozen=True, slots=True)
class Shadow:
    """A user monitor shadowing a built-in of the same name.

    Attributes:
        same_behaviour: True when the user copy is redundant: same fingerprint and
            the same enabled, placement, rate limit, labels and allowDuplicate
            (description may differ). Deleting it then changes nothing but lets
            upstream fixes through. False when either file is invalid.
    """

    name: MonitorName
    user_file: Path
    system_file: Path
    same_behaviour: bool


class Desired(Protocol):
    """The desired set being resolved (``loader.LoadResult`` is one): monitors by name,
    the names whose file is invalid, the shadowed built-ins, the valid overlays."""

    monitors: dict[MonitorName, Monitor]
    invalid: dict[MonitorName, Path]
    shadowed: dict[MonitorName, Shadow]
    overlays: dict[MonitorName, Overlay]


_COMPARED = ("fingerprint", "enabled", "device", "devices", "owners", "shared_input", "rate_limit",
             "labels", "allow_duplicate")


def _differences(user: Monitor, system: Monitor) -> list[str]:
    out = []
    for name in _COMPARED:
        if name == "fingerprint":
            for part in ("source", "condition", "action"):
                if getattr(user, part) != getattr(system, part):
                    out.append(part)
        elif getattr(user, name) != getattr(system, name):
            out.append(name)
    return out


def shadow(result: Desired, layers: dict[Scope, dict[MonitorName, Entry]],
           origins: dict[Scope, dict[MonitorName, Path]],
           bad: dict[Scope, dict[MonitorName, Path]], found: list[Problem],
           cwd: Path) -> dict[MonitorName, Entry]:
    """Shadow system by user (by name); fill ``result.monitors``, ``invalid``, ``shadowed``.

    Returns:
        the entry of every resolved monitor by name (``duplicates`` reads them).
    """
    entries: dict[MonitorName, Entry] = {}
    for name, entry in layers[Scope.SYSTEM].items():
        entries[name] = entry
    for name, path in bad[Scope.SYSTEM].items():
        result.invalid[name] = path
    for name, user_path in origins[Scope.USER].items():
        system_path = origins[Scope.SYSTEM].get(name)
        user_entry = layers[Scope.USER].get(name)
        if system_path is not None:
            system_entry = layers[Scope.SYSTEM].get(name)
            same = False
            if user_entry is not None and system_entry is not None:
                diff = _differences(user_entry.monitor, system_entry.monitor)
                same = not diff
                shown = display(system_path, cwd)
                if same:
                    found.append(P.info(display(user_path, cwd), 1, 1, "",
                                        f"shadows built-in {shown} with the same behaviour: "
                                        f"delete this copy to follow upstream changes",
                                        "shadowed-redundant"))
                else:
                    found.append(P.info(display(user_path, cwd), 1, 1, "",
                                        f"shadows built-in {shown} and differs in "
                                        f"{', '.join(diff)}: it no longer receives upstream "
                                        f"changes", "shadowed-diverged"))
            result.shadowed[name] = Shadow(name, user_path, system_path, same)
            entries.pop(name, None)
            result.invalid.pop(name, None)
        if user_entry is None:
            result.invalid[name] = bad[Scope.USER].get(name, user_path)
        else:
            entries[name] = user_entry
    for name, entry in entries.items():
        result.monitors[name] = entry.monitor
    return entries


def apply_overlays(result: Desired, files: list[OverlayFile], found: list[Problem],
                   now: datetime, cwd: Path) -> None:
    """Validate each overlay and apply it to the monitor it names, one ``problems.guard`` per
    file: an overlay that raises makes its monitor invalid, never silently unpaused."""
    known = set(result.monitors) | set(result.invalid)
    by_monitor: dict[str, Path] = {}
    for path, file, doc, problems in files:
        with P.guard(file, found) as guard:
            _apply_overlay(result, path, file, doc, problems, found=found, known=known,
                           by_monitor=by_monitor, now=now, cwd=cwd)
        if guard.failed:
            name = MonitorName(path.stem)
            result.overlays.pop(name, None)
            if result.monitors.pop(name, None) is not None:
                result.invalid[name] = path


def _apply_overlay(result: Desired, path: Path, file: str, doc: yamlload.Document | None,
                   problems: list[Problem], *, found: list[Problem], known: set[MonitorName],
                   by_monitor: dict[str, Path], now: datetime, cwd: Path) -> None:
    overlay = None
    if doc is not None:
        overlay, problems = overlays.from_document(doc, path, problems)
    found.extend(problems)
    if overlay is None:
        name = MonitorName(path.stem)
        if name in result.monitors:  # a broken pause must not silently resume
            del result.monitors[name]
            result.invalid[name] = path
        return
    name = MonitorName(overlay.monitor)
    if name in by_monitor:
        found.append(P.error(file, overlay.line, overlay.col, "monitor",
                             f"a second overlay for {name!r} (first: "
                             f"{display(by_monitor[name], cwd)})", "duplicate-name"))
        return
    by_monitor[name] = path
    if name not in known:
        hint = validate.suggest(name, sorted(known))
        found.append(P.error(file, overlay.line, overlay.col, "monitor",
                             f"overlay for {name!r}, but no layer defines that monitor{hint}",
                             "overlay-orphan"))
        return
    result.overlays[name] = overlay
    monitor = result.monitors.get(name)
    if monitor is None:
        return
    pause = overlay.pause
    if pause is not None and overlays.is_expired(pause, now):
        found.append(P.warning(file, overlay.until_pos[0], overlay.until_pos[1],
                               "pause.until",
                               f"pause expired at {pause.until}: {name} runs again; remove "
                               f"the overlay (monitors resume {name})", "overlay-expired"))
        pause = None
    changes: dict[str, object] = {"overlay": path, "pause": pause}
    if overlay.pin:
        device = overlay.pin.get("device")
        changes["device"] = DeviceName(device) if device else None
        changes["devices"] = tuple(DeviceName(d) for d in overlay.pin.get("devices") or ())
    result.monitors[name] = dataclasses.replace(monitor, **changes)  # type: ignore[arg-type]


NAMED_DUPLICATES = 3
"""How many other files a ``duplicate-fingerprint`` error names; the rest are counted
("and 1,997 more"), so N identical files print N bounded lines, not N squared names."""


def duplicates(entries: Iterable[Entry], cwd: Path) -> list[Problem]:
    """Two resolved monitors with one fingerprint are one trigger fired twice: an error on
    each monitor that does not declare ``allowDuplicate``, naming the other file(s) (at
    most ``NAMED_DUPLICATES``, then how many more). Linear in the number of entries."""
    groups: dict[str, list[Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.monitor.fingerprint, []).append(entry)
    out = []
    for group in groups.values():
        eligible = [e for e in group if not e.monitor.allow_duplicate]
        if len(group) < 2 or len(eligible) < 2:
            continue
        shown = [f"{e.monitor.name} ({display(e.monitor.origin, cwd)})"
                 for e in eligible[:NAMED_DUPLICATES + 1]]
        for i, entry in enumerate(eligible):
            m = entry.monitor
            named = [text for j, text in enumerate(shown) if j != i][:NAMED_DUPLICATES]
            more = len(eligible) - 1 - len(named)
            names = ", ".join(named) + (f" and {more:,} more" if more else "")
            out.append(P.error(display(m.origin, cwd), entry.source_pos[0], entry.source_pos[1],
                               "source",
                               f"same source, condition and action (fingerprint "
                               f"{m.fingerprint[:19]}) as {names}: one trigger fired twice; "
                               f"remove one, or set allowDuplicate: true if deliberate",
                               "duplicate-fingerprint"))
    return out
