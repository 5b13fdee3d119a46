"""``add``'s duplicate checks: the name is taken in either layer, or the behaviour (the
fingerprint, DESIGN.md §2) already exists under another name in either layer
(shadowed built-ins included; a paused duplicate is still a duplicate).

Returns the conflicts as data; must not decide whether ``--force`` overrides them
(the command does) and must not write anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.config import normalize
from reconciler.config.authoring import locate
from reconciler.model import Monitor, Scope
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.config.loader import LoadResult


@dataclass(frozen=True)
class Conflict:
    """Why ``add`` refuses: ``kind`` is ``name`` or ``behaviour``."""

    kind: str
    message: str


def _shadowed_monitors(loaded: LoadResult) -> list[Monitor]:
    out: list[Monitor] = []
    from reconciler.config import yamlload

    for name, shadow in loaded.shadowed.items():
        doc, _problems = yamlload.load(Path(shadow.system_file))
        if doc is None or not isinstance(doc.data, dict):
            continue
        try:
            out.append(normalize.monitor(doc.data, name=name, scope=Scope.SYSTEM,
                                         origin=Path(shadow.system_file)))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def existing_monitors(loaded: LoadResult) -> list[Monitor]:
    """Every monitor of both layers: the resolved set plus shadowed built-ins."""
    return [*loaded.monitors.values(), *_shadowed_monitors(loaded)]


def conflicts(settings: Settings, monitor: Monitor, *, loaded: LoadResult) -> list[Conflict]:
    """Name and behaviour collisions of a new ``monitor`` with both layers.

    Args:
        loaded: a ``loader.LoadResult`` of the current repository.
    """
    out: list[Conflict] = []
    found = locate.find(settings, monitor.name, loaded=loaded)
    if found.exists:
        where = found.user or found.system
        out.append(Conflict("name", f"a monitor named {monitor.name!r} already exists "
                                    f"({locate.shown(settings, where)})"))
    seen: set[str] = set()
    for other in existing_monitors(loaded):
        if other.fingerprint != monitor.fingerprint or other.name == monitor.name:
            continue
        key = f"{other.name}:{other.scope}"
        if key in seen:
            continue
        seen.add(key)
        layer = "built-in" if other.scope is Scope.SYSTEM else "user monitor"
        shown = locate.shown(settings, other.origin)
        out.append(Conflict("behaviour", f"{layer} {other.name!r} ({shown}) already watches "
                                         "this source, decides the same way and does the same "
                                         "thing"))
    return out
