"""Where monitors live: the user file and/or built-in defining a name, and paths as
shown to the user (relative to the repository root).

Reads the layer folders (or a loaded repository); must not write or delete anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.model import MonitorName, Scope
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.config.loader import LoadResult

SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class Found:
    """Where a monitor name is defined: its user file and/or its built-in file."""

    name: str
    user: Path | None = None
    system: Path | None = None

    @property
    def exists(self) -> bool:
        """Defined in at least one layer."""
        return self.user is not None or self.system is not None


def _layer_file(folder: Path, name: str) -> Path | None:
    """``folder/NAME.yml`` or ``.yaml`` (the loader reads files directly in a layer)."""
    for suffix in SUFFIXES:
        path = folder / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def find(settings: Settings, name: str, *, loaded: LoadResult | None = None) -> Found:
    """Where ``name`` is defined. ``loaded`` (a ``loader.LoadResult``) is consulted
    first for a monitor's origin; the layer folders are searched for ``NAME.yml``
    and ``NAME.yaml`` otherwise (so an invalid file is still found)."""
    user = system = None
    if loaded is not None:
        monitor = loaded.monitors.get(MonitorName(name))
        if monitor is not None:
            if monitor.scope is Scope.USER:
                user = Path(monitor.origin)
            else:
                system = Path(monitor.origin)
        shadow = loaded.shadowed.get(MonitorName(name))
        if shadow is not None:
            user, system = Path(shadow.user_file), Path(shadow.system_file)
    overlays = settings.overlays_dir.resolve()
    if user is None:
        candidate = _layer_file(settings.user_dir, name)
        if candidate is not None and not candidate.resolve().is_relative_to(overlays):
            user = candidate
    if system is None:
        system = _layer_file(settings.system_dir, name)
    return Found(name, user, system)


def shown(settings: Settings, path: Path | None) -> str:
    """``path`` as shown to the user: relative to the repository root when inside it,
    else as given; ``"?"`` for None."""
    if path is None:
        return "?"
    try:
        return str(Path(path).resolve().relative_to(settings.root))
    except ValueError:
        return str(path)
