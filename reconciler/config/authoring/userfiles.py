"""``remove`` and ``edit``'s changes to the user layer: delete a user file (and its
orphaned overlay), and copy a built-in into ``monitors.d/`` so the copy shadows it.

Must never delete or write a file in ``system/`` (it is pull-only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.config import writer
from reconciler.config.authoring import locate
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.config.loader import LoadResult


@dataclass(frozen=True)
class Removed:
    """What ``remove`` did: the deleted file, an orphaned overlay deleted with it,
    and the built-in that applies again (when the user file shadowed one)."""

    path: Path
    overlay: Path | None = None
    builtin: Path | None = None


def remove(settings: Settings, name: str, *, loaded: LoadResult | None = None) -> Removed:
    """Delete the user file of ``name``; a built-in is never removed.

    When no layer defines ``name`` afterwards, its overlay is deleted too.

    Raises:
        errors.NotFoundError: no monitor called ``name``.
        errors.UsageError: ``name`` is a built-in only (the message says to pause it).
    """
    found = locate.find(settings, name, loaded=loaded)
    if found.user is None:
        if found.system is not None:
            raise errors.UsageError(
                f"{name} is a built-in ({locate.shown(settings, found.system)}); built-ins "
                f"cannot be removed (system/ is pull-only): pause it with `monitors pause {name}`"
            )
        raise errors.NotFoundError(f"no monitor named {name!r} in "
                                   f"{locate.shown(settings, settings.user_dir)}/")
    try:
        found.user.unlink()
    except OSError as e:
        raise errors.ConfigError(f"{found.user}: cannot delete: {e.strerror}") from e
    overlay = None
    if found.system is None:
        path = writer.overlay_path(settings, name)
        if path.exists():
            try:
                path.unlink()
                overlay = path
            except OSError as e:
                raise errors.ConfigError(f"{path}: cannot delete: {e.strerror}") from e
    return Removed(found.user, overlay, found.system)


def copy_builtin(settings: Settings, name: str, system_file: Path, *, command: str) -> Path:
    """Create ``monitors.d/NAME.yml`` as a copy of a built-in (it then shadows it).

    The copy keeps the built-in's bytes below a header saying where it came from
    and that it no longer receives upstream fixes.

    Raises:
        errors.ConfigError: the user file exists already or cannot be written.
    """
    target = settings.user_dir / f"{name}.yml"
    if target.exists():
        raise errors.ConfigError(f"{target}: exists already")
    body = system_file.read_text(encoding="utf-8")
    header = (f"# Copied from {locate.shown(settings, system_file)} by `{command}`.\n"
              "# This user copy shadows the built-in and no longer receives upstream fixes;\n"
              "# delete it to follow upstream again.\n")
    writer.atomic_write(target, header + body)
    return target
