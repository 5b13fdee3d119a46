"""``monitors.toml`` and the fleet file against their JSON Schemas, with positions.

Both files used to be read with ``.get()``, so ``devce = "x"``, ``[daemon] resyncc``
or ``adress:`` in the fleet file passed in silence. Here each is validated against
its shipped schema (``schemas/settings.schema.json``, ``schemas/fleet.schema.json``;
draft 2020-12, ``additionalProperties: false``) by the same compiled validator and
the same error translation as monitor files (``validate.check``): one ``Problem``
per finding at the key's or value's ``line:col``, unknown keys with a did-you-mean.

* ``settings_problems(cfg)``: ``cfg.toml`` (what this invocation runs with) against
  the settings schema. A valid file costs one compiled validation; only when it has
  problems is the text read again and scanned for positions (``tomlpos``), and only
  if it still parses to the same table (else every problem is at 1:1).
* ``fleet_problems(path)``: the fleet file read with ``yamlload`` (positions,
  duplicate keys, YAML 1.1 surprises) against the fleet schema, plus device names
  listed twice, addresses that are neither ``host:port`` nor
  ``http(s)://host[:port]`` (``bad-address``) and ``caFile`` values that cannot
  verify a peer (``ca-file``).
  ``reconciler.fleet.load`` raises the first of them.
* ``summary(problems)``: one line for commands that refuse an invalid file.

Used by ``monitors lint`` (every problem), ``plan`` and the daemon (through
``actions.checks.bound``: an invalid monitors.toml makes no plan and starts no
daemon). Reads files only; never writes. No ``jsonschema`` (pure Python) import.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path

from reconciler.config import files, schemas, tomlpos, trust, validate, yamlload
from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.settings import SETTINGS_FILE, Settings


def settings_document(cfg: Settings) -> yamlload.Document:
    """``cfg.toml`` as a positioned document (positions from the file on disk when it
    still parses to ``cfg.toml``, else all 1:1)."""
    path = cfg.root / SETTINGS_FILE
    text: str | None
    try:
        text = path.read_text(encoding="utf-8")
        if tomllib.loads(text) != dict(cfg.toml):
            text = None  # edited since it was read: its positions would mislead
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        text = None
    return tomlpos.document(cfg.toml, text, file=files.display(path))


def settings_problems(cfg: Settings) -> list[Problem]:
    """Schema problems of ``cfg.toml`` (``schemas/settings.schema.json``), sorted.

    Empty when ``monitors.toml`` is valid or absent. Rules: ``unknown-field`` (with a
    did-you-mean), ``schema``, ``bad-duration``; and what the daemon would refuse in
    ``[http]`` (``_http_problems``). Never raises on bad input.
    """
    if not cfg.toml:
        return []
    found = _http_problems(cfg)
    if schemas.validator("settings").is_valid(tomlpos.plain(cfg.toml)):
        return found
    return sorted([*validate.check(settings_document(cfg), kind="settings"), *found])


def _http_problems(cfg: Settings) -> list[Problem]:
    """What ``server.options.load`` refuses at start and the schema cannot say: a
    ``listen`` that is not ``host:port`` with a port in 0-65535 (``bad-address``), and
    one of ``certFile``/``keyFile`` without the other (``settings``)."""
    from reconciler import fleet

    http = cfg.toml.get("http")
    if not isinstance(http, dict):
        return []
    out: list[Problem] = []
    listen = http.get("listen")
    if isinstance(listen, str) and listen.strip():
        try:
            fleet.split_address(listen.strip(), port_zero=True)
        except ValueError as e:
            out.append(at_field(cfg, "http.listen", str(e), "bad-address", key=False))
    cert, key = http.get("certFile"), http.get("keyFile")
    if bool(cert) != bool(key):
        missing = "keyFile" if cert else "certFile"
        out.append(at_field(cfg, f"http.{missing}", "missing: certFile and keyFile go "
                            "together (TLS needs both)"))
    return out


def at_field(cfg: Settings, field: str, message: str, rule: str = "settings", *,
             key: bool = True) -> Problem:
    """An error about ``field`` (dotted: ``channels.phone.url``) of monitors.toml, at
    that key's position (its value's with ``key=False``; its deepest existing
    parent's when the key is absent)."""
    doc = settings_document(cfg)
    path = tuple(field.split(".")) if field else ()
    line, col = doc.position(path, key=key)
    return P.error(doc.file, line, col, field, message, rule)


def fleet_problems(path: Path) -> list[Problem]:
    """Problems of the fleet file at ``path`` (none when it does not exist), sorted:
    see ``read_fleet``. Never raises."""
    return read_fleet(path)[1]


def read_fleet(path: Path) -> tuple[yamlload.Document | None, list[Problem]]:
    """Read the fleet file at ``path``: ``(document, problems)``; ``(None, [])`` when
    it does not exist. Never raises.

    File-level problems come from ``yamlload`` (unreadable, syntax, duplicate keys,
    tags...; then no document; before them ``unsafe-permissions`` when another user could
    have written it, ``config.trust``), then the fleet schema (``schema``, ``unknown-field``),
    then a device listed twice (``duplicate-name``, at the second entry), then an
    address that is not ``host:port`` or ``http(s)://host[:port]`` with a port in
    1-65535 (``bad-address``), then a ``caFile`` that is missing, unreadable, holds no
    PEM certificate or is set for an address that is not ``https://`` (``ca-file``).
    """
    if not path.is_file() and not path.is_symlink():
        return None, []
    unsafe = trust.file_problem(path, "fleet file", root=path.parent.resolve())
    if unsafe:
        return None, [P.error(files.display(path), 1, 1, "", unsafe, trust.RULE)]
    doc, found = yamlload.load(path, file=files.display(path))
    if doc is None:
        return None, sorted(found)
    found += validate.check(doc, kind="fleet")
    found += _duplicate_devices(doc)
    found += _bad_addresses(doc)
    found += _ca_files(doc, path)
    return doc, sorted(found)


def _bad_addresses(doc: yamlload.Document) -> list[Problem]:
    """``bad-address`` errors for device addresses that are not ``host:port`` or
    ``http(s)://host[:port]`` with a port in 1-65535 (``fleet.parse_address``), at the
    address."""
    from reconciler import fleet

    devices = doc.data.get("devices")
    out: list[Problem] = []
    for i, device in enumerate(devices if isinstance(devices, list) else ()):
        address = device.get("address") if isinstance(device, dict) else None
        if not isinstance(address, str):
            continue  # the schema reports a wrong type
        try:
            fleet.parse_address(address)
        except ValueError as e:
            line, col = doc.position(("devices", i, "address"))
            out.append(P.error(doc.file, line, col, f"devices.{i}.address", str(e),
                               "bad-address"))
    return out


def _ca_files(doc: yamlload.Document, path: Path) -> list[Problem]:
    """``ca-file`` errors at a device's ``caFile``: set beside an address that is not
    ``https://`` (it would never be used: a forgotten scheme), or a file that the TLS
    context cannot load (``fleetlink.check_ca_file``; the path resolved against the
    fleet file's directory, ``fleet.ca_path``); ``unsafe-permissions`` when another
    user could write a bundle that loads (``config.trust``). Loads ``ssl`` only when a
    device has a ``caFile``."""
    from reconciler import fleet

    devices = doc.data.get("devices")
    out: list[Problem] = []
    for i, device in enumerate(devices if isinstance(devices, list) else ()):
        ca = device.get("caFile") if isinstance(device, dict) else None
        if not isinstance(ca, str) or not ca:
            continue  # the schema reports a wrong type or an empty string
        address, rule = device.get("address"), "ca-file"
        try:
            https = isinstance(address, str) and fleet.parse_address(address).tls
        except ValueError:
            continue  # bad-address says it
        if not https:
            why = (f"caFile is only used over TLS, but address {address!r} is plain "
                   f"HTTP: write it as https://host:port" if isinstance(address, str)
                   else "caFile is only used over TLS, and this device has no address")
        else:
            from reconciler import fleetlink

            shown = fleet.ca_path(path, ca)
            problem = fleetlink.check_ca_file(shown)
            if problem is None:
                # whoever can write the bundle can impersonate the peer and be sent its token
                unsafe = trust.file_problem(shown, "CA file", root=path.parent.resolve())
                if unsafe is None:
                    continue
                why, rule = unsafe, trust.RULE
            else:
                why = f"caFile {files.display(shown)}: {problem}"
        line, col = doc.position(("devices", i, "caFile"))
        out.append(P.error(doc.file, line, col, f"devices.{i}.caFile", why, rule))
    return out


def _duplicate_devices(doc: yamlload.Document) -> list[Problem]:
    devices = doc.data.get("devices")
    if not isinstance(devices, list):
        return []
    first: dict[str, int] = {}
    out: list[Problem] = []
    for i, device in enumerate(devices):
        name = device.get("name") if isinstance(device, dict) else None
        if not isinstance(name, str):
            continue
        if name in first:
            line, col = doc.position(("devices", i, "name"))
            was, _ = doc.position(("devices", first[name], "name"))
            out.append(P.error(doc.file, line, col, f"devices.{i}.name",
                               f"device {name!r} is listed twice (first at line {was})",
                               "duplicate-name"))
        else:
            first[name] = i
    return out


def summary(problems: Iterable[Problem]) -> str | None:
    """One line for the first error among ``problems``: ``file:line:col: field: message``,
    plus how many more there are; None when there is no error."""
    found = sorted(p for p in problems if str(p.severity) == "error")
    if not found:
        return None
    first = found[0]
    where = f"{first.field}: " if first.field else ""
    more = (f" (and {len(found) - 1} more; `monitors lint` lists them)"
            if len(found) > 1 else "")
    return f"{first.file}:{first.line}:{first.col}: {where}{first.message}{more}"
