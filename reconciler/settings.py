"""Where things are: repository root discovery, ``monitors.toml`` and this device's name.

Pure look-ups on the file system; no click. Precedence for every setting is
command-line option > environment variable > ``monitors.toml`` > default.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import errors

SETTINGS_FILE = "monitors.toml"
USER_DIR = "monitors.d"
SYSTEM_DIR = "system"
OVERLAYS_DIR = "overlays"
STATE_DIR = ".history"
FLEET_FILE = "fleet.yaml"
DEVICE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
"""A device name: the ``devices[].name`` pattern of ``schemas/fleet.schema.json``."""
_DEVICE_RE = re.compile(DEVICE_PATTERN)


def device_problem(name: str) -> str | None:
    """Why ``name`` is not a valid device name (``DEVICE_PATTERN``), or None when it is."""
    if _DEVICE_RE.fullmatch(name):
        return None
    return (f"{name!r} is not a valid device name: letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, at most 63 characters")


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved locations and configuration for one invocation.

    Attributes:
        root: the repository root (holds ``monitors.d/`` or ``monitors.toml``).
        user_dir: the user layer (``monitors.d/``).
        system_dir: the pull-only system layer (``system/``).
        overlays_dir: generated overlays (``monitors.d/overlays/``).
        state_dir: per-machine runtime state (default ``.history/``, git-ignored).
        fleet_file: the fleet file (``fleet.yaml``); may not exist.
        device: this device's name.
        toml: the parsed ``monitors.toml`` (empty when absent); sections
            ``agents``, ``routines``, ``channels``, ``system``, ``daemon``. Not
            validated here: ``config.settings_check`` checks it against
            ``schemas/settings.schema.json`` (lint, plan and the daemon do).
    """

    root: Path
    user_dir: Path
    system_dir: Path
    overlays_dir: Path
    state_dir: Path
    fleet_file: Path
    device: str
    toml: Mapping[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> Mapping[str, Any]:
        """Return the ``[name]`` table of ``monitors.toml`` (empty when absent)."""
        value = self.toml.get(name, {})
        return value if isinstance(value, Mapping) else {}


def find_root(start: Path) -> Path | None:
    """Return the nearest ancestor of ``start`` (itself included) holding
    ``monitors.d/`` or ``monitors.toml``, or None."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / USER_DIR).is_dir() or (candidate / SETTINGS_FILE).is_file():
            return candidate
    return None


def read_toml(path: Path) -> dict[str, Any]:
    """Parse ``monitors.toml``; a missing file is an empty table.

    Raises:
        errors.ConfigError: ``path:line:col: message`` for invalid TOML, or for arrays
            and tables nested deeper than ``MAX_DEPTH``.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise errors.ConfigError(f"{path}: cannot read: {e.strerror}") from e
    try:
        text = data.decode("utf-8")
        deep = _too_deep(text)
        if deep is not None:
            raise errors.ConfigError(f"{path}:{deep[0]}:{deep[1]}: arrays and inline tables "
                                     f"nested deeper than {MAX_DEPTH} levels")
        table = tomllib.loads(text)
        if _depth(table) > MAX_DEPTH:  # dotted keys nest without brackets
            raise errors.ConfigError(f"{path}: tables nested deeper than {MAX_DEPTH} levels")
        return table
    except UnicodeDecodeError as e:
        raise errors.ConfigError(f"{path}: not UTF-8 (byte {e.start})") from e
    except RecursionError as e:  # pragma: no cover - _too_deep and MAX_DEPTH stop it before
        raise errors.ConfigError(f"{path}: nested too deeply") from e
    except tomllib.TOMLDecodeError as e:
        # tomllib (3.11-3.13) puts the position in the message: "... (at line 3, column 5)"
        message = str(e)
        at = _TOML_AT.search(message)
        if at is None:
            raise errors.ConfigError(f"{path}: invalid TOML: {message}") from e
        raise errors.ConfigError(f"{path}:{at.group(1)}:{at.group(2)}: invalid TOML: "
                                 f"{message[:at.start()].rstrip()}") from e


MAX_DEPTH = 64
"""Most tables and arrays nested inside one another in ``monitors.toml`` (as
``yamlbuild.MAX_DEPTH`` for YAML): deeper input would hit tomllib's recursion (about 500
levels) or the schema validator's limit (about 250) and end in a traceback."""


def _too_deep(text: str) -> tuple[int, int] | None:
    """1-based ``(line, col)`` of the first ``[`` or ``{`` nested deeper than ``MAX_DEPTH``
    in the TOML ``text`` (strings and comments skipped, per TOML 1.0), or None. A
    linear scan: it must not recurse on the input it guards against."""
    line = 1
    start = i = 0
    n = len(text)
    depth = 0
    while i < n:
        c = text[i]
        if c == "\n":
            line, start = line + 1, i + 1
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                if text[j] == "\\" and c == '"':
                    j += 1
                elif text[j] == "\n":
                    if len(quote) == 1:
                        break  # an unterminated string: tomllib reports it
                    line, start = line + 1, j + 1
                j += 1
            i = j + len(quote)
            continue
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line, i - start + 1
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def _depth(value: Any) -> int:
    """How many tables and arrays ``value`` holds inside one another, itself not counted
    (iterative)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((v, level + 1) for v in (item.values() if isinstance(item, dict)
                                                       else item))
    return deepest


_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def load(
    *,
    root: Path | None = None,
    state_dir: Path | None = None,
    device: str | None = None,
    cwd: Path | None = None,
    root_source: str = "--root",
    device_source: str = "--device",
) -> Settings:
    """Resolve settings for this invocation.

    Args:
        root: explicit repository root (``--root`` / ``MONITORS_ROOT``); else discovered
            from ``cwd`` (default: the working directory).
        state_dir: explicit state directory (``--state-dir`` / ``MONITORS_STATE_DIR``).
        device: explicit device name (``--device`` / ``MONITORS_DEVICE``); None or
            ``""`` falls back to ``monitors.toml``'s ``device``, then the host name.
        root_source, device_source: where ``root`` and ``device`` came from
            (``--root`` or ``MONITORS_ROOT``...), named in errors.

    Raises:
        errors.ConfigError: no repository root found, the root is not a directory
            (naming its source and path), its path is not valid UTF-8,
            ``monitors.toml`` is invalid or another user could have written it
            (``config.trust``, rule ``unsafe-permissions``), or an explicit
            or configured device name does not match ``DEVICE_PATTERN``.
    """
    if root is None:
        found = find_root(cwd or Path.cwd())
        if found is None:
            raise errors.ConfigError(
                "no monitors repository here: no monitors.d/ or monitors.toml in this "
                "directory or any parent (use --root or MONITORS_ROOT)"
            )
        root = found
    given = root
    root = root.resolve()
    if not root.is_dir():
        what = "not a directory" if root.exists() else "no such directory"
        raise errors.ConfigError(f"{given} (from {root_source}): {what}")
    try:
        str(root).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(root).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise errors.ConfigError(f"{shown}: the repository path is not valid UTF-8; rename "
                                 f"or move the repository") from None
    toml = read_toml(root / SETTINGS_FILE)
    if toml:
        from reconciler.config import trust

        unsafe = trust.file_problem(root / SETTINGS_FILE, SETTINGS_FILE, root=root)
        if unsafe:  # any section decides what runs, is read or written (sshd StrictModes)
            raise errors.ConfigError(f"{root / SETTINGS_FILE}:1:1: {unsafe} [{trust.RULE}]")
    layers = toml.get("layers", {}) if isinstance(toml.get("layers"), dict) else {}
    user_dir = root / str(layers.get("user", USER_DIR))
    system_dir = root / str(layers.get("system", SYSTEM_DIR))
    overlays_dir = root / str(layers.get("overlays", f"{user_dir.name}/{OVERLAYS_DIR}"))
    if state_dir is None:
        configured = toml.get("stateDir")
        state_dir = root / str(configured) if configured else root / STATE_DIR
    if device:
        problem = device_problem(device)
        if problem:
            raise errors.ConfigError(f"{device_source}: {problem}")
    else:
        configured_device = str(toml.get("device") or "")
        problem = device_problem(configured_device) if configured_device else None
        if problem:
            raise errors.ConfigError(f"{root / SETTINGS_FILE}: device: {problem}")
        # the host name: uname's nodename is what gethostname(2) returns on Linux, without
        # importing socket (~2 ms of every command's start-up)
        device = configured_device or os.uname().nodename.split(".")[0] or "localhost"
    fleet = toml.get("fleet", {}) if isinstance(toml.get("fleet"), dict) else {}
    fleet_file = root / str(fleet.get("file", FLEET_FILE))
    return Settings(
        root=root,
        user_dir=user_dir,
        system_dir=system_dir,
        overlays_dir=overlays_dir,
        state_dir=Path(os.path.abspath(state_dir)),
        fleet_file=fleet_file,
        device=device,
        toml=toml,
    )
