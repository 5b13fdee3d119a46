"""The fleet file (``fleet.yaml``): which devices exist, their control addresses, and
which one is the interactive host. Read-only here; validated against
``schemas/fleet.schema.json``.

A device's ``address`` is ``host:port`` (plain HTTP, as before TLS existed) or a URL
origin ``http://host[:port]`` / ``https://host[:port]`` (``parse_address``): the
scheme says how to reach its daemon, as an etcd endpoint or a Prometheus target does.
``caFile`` (a PEM bundle, relative to the fleet file's directory) is what an
``https://`` peer's certificate is verified against; ``reconciler.fleetlink`` builds
the URL and the TLS context from both.
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
        address: its daemon's HTTP API as written (``host:port``, ``http://...`` or
            ``https://...``; ``parse_address``), or None.
        interactive: the fleet's interactive host (owner of unpinned built-ins).
        token_env: the environment variable holding its API token (None: this
            device's own token, ``reconciler.tokens``).
        ca_file: the PEM bundle its TLS certificate is verified against, resolved
            against the fleet file's directory (None: the system trust store).
    """

    name: DeviceName
    address: str | None = None
    interactive: bool = False
    token_env: str | None = None
    ca_file: Path | None = None


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


SCHEMES = {"http": 80, "https": 443}
"""The schemes an address may carry, with their default ports (RFC 9110 section 4.2)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a device's daemon answers: ``scheme`` (``http`` or ``https``), ``host``
    (an IPv6 literal without brackets), ``port`` (1-65535)."""

    scheme: str
    host: str
    port: int

    @property
    def origin(self) -> str:
        """``scheme://host:port`` (an IPv6 host in brackets): the base of every URL."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{shown}:{self.port}"

    @property
    def tls(self) -> bool:
        """True for ``https``."""
        return self.scheme == "https"


def parse_address(address: str) -> Endpoint:
    """A device's ``address`` -> its ``Endpoint``.

    ``host:port`` (``[v6]:port`` too) is plain HTTP, as it always was;
    ``http://host[:port]`` and ``https://host[:port]`` say the scheme (case-insensitive),
    the port defaulting to the scheme's (80, 443) and one trailing ``/`` allowed.
    Anything more (a path, query, fragment or user) is refused: the API's paths are
    fixed, so a base path could only be a mistake.

    Raises:
        ValueError: not one of those forms, another scheme, or a bad port; the
            message names the address (``split_address``'s for the port).
    """
    scheme, sep, rest = address.partition("://")
    if not sep:
        host, port = split_address(address)
        return Endpoint("http", host, port)
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(f"address {address!r}: scheme {scheme!r} is not http or https")
    rest = rest.removesuffix("/")
    if any(c in rest for c in "/?#@"):
        raise ValueError(f"address {address!r} is not {scheme}://host:port (no path, "
                         "query or user)")
    if rest.endswith("]") or ":" not in rest:  # no port: the scheme's
        host, port = rest.strip("[]"), SCHEMES[scheme]
    else:
        try:
            host, port = split_address(rest)
        except ValueError as e:  # its message names ``rest``: name the address instead
            raise ValueError(str(e).replace(repr(rest), repr(address), 1).replace(
                "is not host:port", f"is not {scheme}://host:port")) from None
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"address {address!r} is not {scheme}://host:port")
    return Endpoint(scheme, host, port)


def schema() -> dict[str, Any]:
    """The fleet file's JSON Schema (draft 2020-12) as a dict."""
    from reconciler.config import schemas

    return schemas.document("fleet")


def ca_path(fleet_file: Path, ca_file: str) -> Path:
    """A device's ``caFile`` as written -> its path: ``~`` expanded, a relative path
    taken from the fleet file's directory (so the fleet file and its CA bundle move
    together, as a kubeconfig's ``certificate-authority`` does)."""
    path = Path(ca_file).expanduser()
    return path if path.is_absolute() else fleet_file.parent / path


def load(path: Path) -> Fleet:
    """Read and validate a fleet file; a missing file is an empty fleet.

    Validation is ``config.settings_check.fleet_problems`` (the YAML reader and the
    compiled schema validator that monitor files use), so the file has the same
    checks with positions in ``monitors lint``.

    Raises:
        errors.ConfigError: ``path:line:col: field: message`` for the first problem
            (unreadable, not YAML, a duplicate key, a schema error such as an unknown
            field with a did-you-mean, a device listed twice, an address that is not
            ``host:port`` or ``http(s)://host[:port]``, a ``caFile`` that cannot be
            used), naming how many more.
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
               d.get("tokenEnv"), ca_path(path, d["caFile"]) if d.get("caFile") else None)
        for d in doc.data["devices"]
    )
    return Fleet(devices=devices, exists=True)
