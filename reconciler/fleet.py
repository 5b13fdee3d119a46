"""The fleet file (``fleet.yaml``): which devices exist, their control addresses, and
which one is the interactive host. Read-only here; validated against
``schemas/fleet.schema.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from reconciler import errors
from reconciler.model import DeviceName


@dataclass(frozen=True, slots=True)
class Device:
    """One fleet device.

    Attributes:
        name: the device name monitors pin to.
        address: ``host:port`` of its daemon's control API over HTTP, or None.
        interactive: the fleet's interactive host (owner of unpinned built-ins).
    """

    name: DeviceName
    address: str | None = None
    interactive: bool = False


@dataclass(frozen=True, slots=True)
class Fleet:
    """All devices of the fleet, in file order. ``exists`` is False when there is no file."""

    devices: tuple[Device, ...] = ()
    exists: bool = False

    def get(self, name: str) -> Device | None:
        """The device called ``name``, or None."""
        return next((d for d in self.devices if d.name == name), None)

    @property
    def interactive(self) -> Device | None:
        """The first device flagged interactive, or None."""
        return next((d for d in self.devices if d.interactive), None)


def schema() -> dict[str, Any]:
    """The fleet file's JSON Schema (draft 2020-12) as a dict."""
    text = resources.files("reconciler").joinpath("schemas/fleet.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def load(path: Path) -> Fleet:
    """Read and validate a fleet file; a missing file is an empty fleet.

    Raises:
        errors.ConfigError: ``path: field: message`` when the file is unreadable,
            not YAML, or does not match the fleet schema, or names a device twice.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Fleet()
    except (OSError, UnicodeDecodeError) as e:
        raise errors.ConfigError(f"{path}: cannot read fleet file: {e}") from e
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise errors.ConfigError(f"{path}: invalid YAML: {e}") from e
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    problems = sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    if problems:
        first = problems[0]
        where = ".".join(str(p) for p in first.absolute_path) or "(top)"
        raise errors.ConfigError(f"{path}: {where}: {first.message}")
    devices = tuple(
        Device(DeviceName(d["name"]), d.get("address"), bool(d.get("interactive", False)))
        for d in doc["devices"]
    )
    names = [d.name for d in devices]
    for name in names:
        if names.count(name) > 1:
            raise errors.ConfigError(f"{path}: devices: device {name!r} is listed twice")
    return Fleet(devices=devices, exists=True)
