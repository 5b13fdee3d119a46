"""Which files the config stage reads, and how their names are shown.

``collect`` lists the monitor and overlay files of the layers (or of the paths given
to ``lint``), each with its kind; ``display`` and ``printable_name`` give a file's
name as problems show it (relative to the working directory, bytes that are not
UTF-8 escaped); ``bad_filename`` spots a name that cannot be a monitor name.

Must not: read a file's content, judge it, or print (``loader`` and ``yamlload`` do).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from reconciler.settings import Settings

SUFFIXES = (".yml", ".yaml")

FileKind = Literal["system", "user", "overlay"]
"""Which layer a file belongs to (the overlays directory is its own kind)."""


def display(path: Path, cwd: Path | None = None) -> str:
    """How ``path`` is shown in problems: relative to ``cwd`` when below it, else as is;
    a byte that is not UTF-8 in the name is shown escaped (``\\xff``), so the text can
    always be printed."""
    text = str(path)
    prefix = os.path.join(str(cwd or Path.cwd()), "")
    text = text[len(prefix):] if text.startswith(prefix) else text
    return printable_name(text)


def printable_name(text: str) -> str:
    """``text`` (a path as Python decodes it, with ``surrogateescape``) with every byte
    that is not UTF-8 written as ``\\xNN``; the text itself when it is UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def bad_filename(path: Path) -> bool:
    """True when ``path``'s name holds a byte that is not UTF-8 (rule ``bad-filename``):
    such a name cannot be a monitor name, be shown or be written to state."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _yaml_files(directory: Path) -> list[Path]:
    """The ``*.yml``/``*.yaml`` entries directly in ``directory`` that the loader reads:
    regular files, and entries whose type cannot be told (a symlink loop, a permission
    error on the target), which ``yamlload.read`` then reports as that file's
    ``unreadable`` error instead of the whole layer vanishing. A directory, a dangling
    symlink or a device is skipped here (``repochecks.ignored_entries`` warns)."""
    names = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if not e.name.endswith(SUFFIXES) or e.name.startswith("."):
                    continue
                try:
                    if not e.is_file():
                        continue
                except OSError:
                    pass  # read() names the error
                names.append(e.name)
    except OSError:
        return []
    return [directory / n for n in sorted(names)]


def _within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def collect(settings: Settings,
            paths: Sequence[Path] | None = None) -> list[tuple[Path, FileKind]]:
    """The files to read, each with its kind.

    Default (``paths`` None): ``*.yml``/``*.yaml`` directly in the system layer,
    the user layer and the overlays directory. With ``paths``: those files, and
    the YAML files directly in those directories (plus the overlays directory
    when it lies directly below one), classified by where they are: in the
    overlays directory -> overlay, below the system layer -> system, else user.
    """
    system, user, ovl = (settings.system_dir.resolve(), settings.user_dir.resolve(),
                         settings.overlays_dir.resolve())

    def kind(path: Path) -> FileKind:
        if path.parent == ovl:
            return "overlay"
        if _within(path, system):
            return "system"
        return "user"

    out: dict[Path, FileKind] = {}
    if paths is None:
        layers: tuple[tuple[Path, FileKind], ...] = (
            (system, "system"), (user, "user"), (ovl, "overlay"))
        for directory, layer in layers:
            for f in _yaml_files(directory):
                out.setdefault(f, layer)
    else:
        for given in paths:
            p = Path(os.path.abspath(given))
            if p.is_dir():
                p = p.resolve()
                for f in _yaml_files(p):
                    out.setdefault(f, kind(f))
                if ovl.parent == p:
                    for f in _yaml_files(ovl):
                        out.setdefault(f, "overlay")
            else:
                resolved = p.parent.resolve() / p.name if p.parent.exists() else p
                out.setdefault(resolved, kind(resolved))
    return list(out.items())


def rel(path: Path, root: Path) -> str:
    """``path`` as POSIX text relative to ``root`` when below it, else as is (the order
    files are read in, and the digest's names)."""
    text, prefix = path.as_posix(), root.as_posix().rstrip("/") + "/"
    return text[len(prefix):] if text.startswith(prefix) else text
