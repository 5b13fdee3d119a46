"""Canonical YAML writing: monitor files (``add``, ``edit``) and generated overlays.

Two writers, one layout:

* ``monitor_yaml(doc)``: a monitor document in a fixed key order (``name``,
  ``description``, ``source``, ``condition``, ``action``, then labels, placement,
  rate limit), block style, lists indented under their key, multi-line strings as
  literal blocks, strings YAML 1.1 would read as something else (``no``,
  ``0777``, ``1:30``, ISO times) quoted. It starts with the
  ``# yaml-language-server: $schema=...`` modeline so editors validate the file:
  a path relative to the written file pointing at the repository's ``schemas/``
  (``monitors.d/x.yml`` -> ``../schemas/monitor.schema.json``), else the absolute
  path of the schema shipped in the installed package.
* ``write_overlay(settings, name, pause=..., pin=..., command=...)``: the one
  generated file per monitor at ``monitors.d/overlays/NAME.yml`` (DESIGN.md §2)
  that ``pause``/``resume``/``pin``/``unpin`` write or remove. Its header names
  the command that generated it. An overlay left with neither pause nor pin is
  deleted. Nothing here writes into ``system/`` (``system pull`` owns it).

Writes are atomic (temp file in the same directory, fsync, rename). No click, no
printing: callers render what these return.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import yaml

from reconciler import atomic, errors
from reconciler.actions import registry as actions_registry
from reconciler.conditions import spec as condition_spec
from reconciler.config import yamlload
from reconciler.model import Pause
from reconciler.settings import Settings
from reconciler.sources import registry as source_types

API_VERSION = "monitors/v1"
HEADER_COMMAND_MAX = 300
"""Longest command line quoted in a generated header (characters); longer ones end in ...."""


class Unset(enum.Enum):
    """Sentinel type: "leave this part of the overlay as it is"."""

    TOKEN = 0


UNSET: Final = Unset.TOKEN

TOP_ORDER = (
    "apiVersion", "name", "description", "enabled", "source", "condition", "action",
    "until", "stopAfter", "stopWhen", "labels", "device", "devices", "owners",
    "sharedInput",
    "rateLimit", "allowDuplicate",
)
CONDITION_ORDER = condition_spec.KEYS
ACTION_ORDER = actions_registry.KEY_ORDER
OVERLAY_ORDER = ("apiVersion", "monitor", "pause", "pin")
PAUSE_ORDER = ("reason", "until", "author", "created")
PIN_ORDER = ("device", "devices")
RATE_ORDER = ("max", "per")


REPO_SCHEMAS = "schemas"
"""The folder below the repository root holding the JSON Schemas editors use."""


@cache
def schema_ref(kind: str, *, root: Path, target: Path) -> str | None:
    """Where the modeline of a file written at ``target`` points for schema ``kind``.

    A POSIX path relative to ``target``'s folder when ``root/schemas/<kind>.schema.json``
    exists (``monitors.d/x.yml`` -> ``../schemas/monitor.schema.json``;
    ``monitors.d/overlays/x.yml`` -> ``../../schemas/overlay.schema.json``), else None:
    a path into this machine's installed package would be committed and be wrong on
    every other machine, and the ``$id`` URL names the schema but nothing serves it.
    yaml-language-server resolves a relative ``$schema`` against the file.

    Args:
        kind: ``monitor`` or ``overlay``.
        root: the repository root (``Settings.root``).
        target: the file being written (absolute or relative to the working directory).
    """
    name = f"{kind}.schema.json"
    in_repo = root / REPO_SCHEMAS / name
    if not in_repo.is_file():
        return None
    base = Path(os.path.abspath(target)).parent
    return Path(os.path.relpath(os.path.abspath(in_repo), base)).as_posix()


def modeline(kind: str, *, root: Path, target: Path) -> str:
    """The yaml-language-server modeline naming the schema of ``kind`` for a file
    written at ``target`` in the repository at ``root`` (see ``schema_ref``); without
    ``schemas/`` in the repository, a comment saying how to get editor completion."""
    ref = schema_ref(kind, root=root, target=target)
    if ref is None:
        flag = " --overlay" if kind == "overlay" else ""
        return (f"# editor completion: save `monitors schema{flag}` as "
                f"{REPO_SCHEMAS}/{kind}.schema.json")
    return f"# yaml-language-server: $schema={ref}"


class _Dumper(yaml.SafeDumper):
    """Block style with sequences indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_YAML11_YN = frozenset({"y", "Y", "n", "N"})


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if value in _YAML11_YN:  # YAML 1.1 booleans PyYAML's resolver does not know
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _ordered(value: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    out = {k: value[k] for k in order if k in value}
    out.update((k, v) for k, v in value.items() if k not in out)
    return out


def canonical_monitor(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``doc`` with keys in the canonical order (values unchanged, None dropped)."""
    clean = {k: v for k, v in doc.items() if v is not None}
    source = clean.get("source")
    nested = {"source": source_types.key_order(
                  source.get("type") if isinstance(source, Mapping) else None),
              "condition": CONDITION_ORDER, "action": ACTION_ORDER, "rateLimit": RATE_ORDER}
    for key, order in nested.items():
        if isinstance(clean.get(key), Mapping):
            clean[key] = _ordered({k: v for k, v in clean[key].items() if v is not None}, order)
    return _ordered(clean, TOP_ORDER)


def dump(value: Any) -> str:
    """YAML text for ``value`` in the project's block style (no header)."""
    text: str = yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
        width=1 << 16,
    )
    return text


def _header(kind: str, command: str | None, lines: tuple[str, ...] = (), *, root: Path,
            target: Path) -> str:
    out = []
    if command:
        shown = command.replace("\r", "\\r").replace("\n", "\\n")
        if len(shown) > HEADER_COMMAND_MAX:
            shown = shown[: HEADER_COMMAND_MAX - 3] + "..."
        out.append(f"# Generated by `{shown}`.")
    out.extend(lines)
    out.append(modeline(kind, root=root, target=target))
    return "\n".join(out) + "\n"


def monitor_yaml(doc: Mapping[str, Any], *, root: Path, target: Path,
                 command: str | None = None) -> str:
    """Render one monitor document canonically, with the schema modeline.

    Args:
        doc: a monitor mapping (schema shape of ``schemas/monitor.schema.json``);
            keys set to None are left out.
        root, target: the repository root and the file the text is written to
            (the modeline's schema path is relative to it, see ``schema_ref``).
        command: when given, a first comment line names the command that wrote it.
    """
    return _header("monitor", command, root=root, target=target) + dump(canonical_monitor(doc))


def overlay_yaml(doc: Mapping[str, Any], *, root: Path, target: Path, command: str) -> str:
    """Render one overlay document (``monitor``, ``pause``, ``pin``) with its header
    (``root``/``target`` as for ``monitor_yaml``)."""
    body = _ordered(doc, OVERLAY_ORDER)
    if isinstance(body.get("pause"), Mapping):
        body["pause"] = _ordered(body["pause"], PAUSE_ORDER)
    if isinstance(body.get("pin"), Mapping):
        body["pin"] = _ordered(body["pin"], PIN_ORDER)
    note = ("# Generated overlay: patches only pause and placement of one monitor. Change it",
            "# with monitors pause/resume/pin/unpin rather than by hand.")
    return _header("overlay", command, note, root=root, target=target) + dump(body)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably (``reconciler.atomic``).

    Raises:
        errors.ConfigError: the directory cannot be created or written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(path, text.encode("utf-8"), durable=True, mode=0o644)
    except OSError as e:
        raise errors.ConfigError(f"{path}: cannot write: {e.strerror or e}") from e


def overlay_path(settings: Settings, name: str) -> Path:
    """Where the overlay of monitor ``name`` lives: ``<overlays_dir>/NAME.yml``."""
    return settings.overlays_dir / f"{name}.yml"


def _stringify(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _stringify(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_stringify(v) for v in value]
    return value


def read_overlay_doc(path: Path) -> dict[str, Any]:
    """The raw mapping of an existing overlay file, or ``{}`` when there is none.

    Raises:
        errors.ConfigError: the file exists but is not a YAML mapping; the message
            says to fix or delete it (a generated file is never silently replaced).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise errors.ConfigError(f"{path}: cannot read overlay: {e}") from e
    try:
        doc = yamlload.plain(text, file=str(path))
    except errors.ConfigError as e:
        raise errors.ConfigError(f"{e}: an invalid overlay; fix or delete the file first") from e
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise errors.ConfigError(
            f"{path}: overlay is not a mapping; fix or delete the file first"
        )
    loaded: dict[str, Any] = _stringify(doc)
    return loaded


def pause_doc(pause: Pause) -> dict[str, str]:
    """The overlay ``pause`` mapping for ``pause`` (empty fields left out)."""
    out = {"reason": pause.reason, "until": pause.until or "", "author": pause.author,
           "created": pause.created}
    return {k: v for k, v in out.items() if v}


def write_overlay(
    settings: Settings,
    name: str,
    *,
    pause: Pause | Unset | None = UNSET,
    pin: Mapping[str, Any] | Unset | None = UNSET,
    command: str,
) -> Path | None:
    """Write, rewrite or delete the overlay of monitor ``name``.

    Args:
        settings: where the overlays directory is.
        name: the monitor's name (the overlay's ``monitor`` and file stem).
        pause: the new pause, None to remove the pause, ``UNSET`` to keep what
            the file has.
        pin: the new pin (``{"device": D}`` or ``{"devices": [A, B]}``), None to
            remove it, ``UNSET`` to keep it.
        command: the command line that generated it, named in the header
            (e.g. ``monitors pause ci-red --reason flaky``).

    Returns:
        The overlay's path, or None when nothing was left and the file was
        deleted (or there was none to delete).

    Raises:
        errors.ConfigError: the overlays directory lies inside ``system/``, the
            existing overlay is unreadable, or the file cannot be written.
    """
    path = overlay_path(settings, name)
    system = settings.system_dir.resolve()
    if path.resolve().is_relative_to(system):
        raise errors.ConfigError(
            f"{path}: overlays directory is inside the pull-only system layer {system}; "
            "set [layers] overlays in monitors.toml to a folder of the user layer"
        )
    current = read_overlay_doc(path)
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "monitor": name}
    if isinstance(pause, Unset):
        if isinstance(current.get("pause"), Mapping):
            doc["pause"] = dict(current["pause"])
    elif pause is not None:
        doc["pause"] = pause_doc(pause)
    if isinstance(pin, Unset):
        if isinstance(current.get("pin"), Mapping) and current["pin"]:
            doc["pin"] = dict(current["pin"])
    elif pin:
        doc["pin"] = {k: (list(v) if isinstance(v, list | tuple) else v)
                      for k, v in pin.items() if v}
    if "pause" not in doc and "pin" not in doc:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            raise errors.ConfigError(f"{path}: cannot delete: {e.strerror}") from e
        return None
    text = overlay_yaml(doc, root=settings.root, target=path, command=command)
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return path
    atomic_write(path, text)
    return path


def parse_until(value: str, *, now: dt.datetime | None = None) -> str:
    """Turn ``--until`` (a duration such as ``2h``, or an ISO-8601 time) into an
    aware ISO-8601 UTC string (``2026-11-30T01:44:24+00:00``).

    A time without an offset is read as local time. ``now`` (aware) is injectable
    for tests.

    Raises:
        errors.UsageError: neither a duration nor an ISO time, not in the future, or
            past a bound (``durations.MAX_SECONDS`` ahead, ``durations.LATEST``,
            ``durations.EARLIEST``).
    """
    from reconciler import durations

    now = now or dt.datetime.now(dt.UTC)
    text = value.strip()
    try:
        try:
            when = now + dt.timedelta(seconds=durations.parse(text))
        except durations.OutOfRange:
            raise
        except ValueError:
            try:
                parsed = dt.datetime.fromisoformat(text)
            except ValueError:
                raise errors.UsageError(
                    f"--until: expected a duration such as 2h or an ISO time such as "
                    f"2026-12-01T09:00:00Z, got {value!r}"
                ) from None
            try:
                when = parsed if parsed.tzinfo else parsed.astimezone()
            except (OverflowError, ValueError):  # a naive time at an edge of the calendar
                when = (dt.datetime.max if parsed.year > 5000 else dt.datetime.min
                        ).replace(tzinfo=dt.UTC)
            when = durations.check_time(when, text)
    except durations.OutOfRange as e:
        raise errors.UsageError(f"--until: {e}") from None
    when = when.astimezone(dt.UTC).replace(microsecond=0)
    if when <= now:
        raise errors.UsageError(f"--until: {value!r} is not in the future")
    return when.isoformat()

