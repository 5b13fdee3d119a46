"""The fleet file (``fleet.yaml``): which devices exist, their control addresses, and
which one is the interactive host. Read-only here; validated against
``schemas/fleet.schema.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors
from reconciler.model import DeviceName


@dataclass(frozen=True, slots=True)
class Device:
    """One fleet device.

    Attributes:
        name: the device name monitors pin to.
        address: ``host:port`` of its daemon's control API over HTTP, or None.
        interactive: the fleet's interactive host (owner of unpinned built-ins).
        token_env: the environment variable holding its API token (None: this
            device's own token, ``reconciler.tokens``).
    """

    name: DeviceName
    address: str | None = None
    interactive: bool = False
    token_env: str | None = None


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


def split_address(address: str, *, port_zero: bool = False) -> tuple[str, int]:
    """A device's control address ``host:port`` (``[v6]:port`` too) -> ``(host, port)``.

    ``port_zero``: port 0 is allowed too (a listen address: the system picks a port).

    Raises:
        ValueError: no host or no port, a port not in ASCII digits, or a port outside
            1-65535 (TCP, RFC 793); the message names the address.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not host.strip("[]") \
            or any(c.isspace() for c in host):
        raise ValueError(f"address {address!r} is not host:port")
    if not (0 if port_zero else 1) <= int(port) <= 65535:
        raise ValueError(f"address {address!r}: port {int(port)} is outside "
                         f"{0 if port_zero else 1}-65535")
    return host.strip("[]"), int(port)


def schema() -> dict[str, Any]:
    """The fleet file's JSON Schema (draft 2020-12) as a dict."""
    from reconciler.config import schemas

    return schemas.document("fleet")


def load(path: Path) -> Fleet:
    """Read and validate a fleet file; a missing file is an empty fleet.

    Validation is ``config.settings_check.fleet_problems`` (the YAML reader and the
    compiled schema validator that monitor files use), so the file has the same
    checks with positions in ``monitors lint``.

    Raises:
        errors.ConfigError: ``path:line:col: field: message`` for the first problem
            (unreadable, not YAML, a duplicate key, a schema error such as an unknown
            field with a did-you-mean, a device listed twice), naming how many more.
    """
    from reconciler.config import settings_check

    if path.is_dir():
        raise errors.ConfigError(f"{path}: cannot read fleet file: is a directory")
    doc, problems = settings_check.read_fleet(path)
    line = settings_check.summary(problems)
    if line is not None:
        raise errors.ConfigError(line)
    if doc is None:
        return Fleet()
    devices = tuple(
        Device(DeviceName(d["name"]), d.get("address"), bool(d.get("interactive", False)),
               d.get("tokenEnv"))
        for d in doc.data["devices"]
    )
    return Fleet(devices=devices, exists=True)
