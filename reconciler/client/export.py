"""``monitors status --export FILE`` and ``monitors plan --against FILE``: a device's
running state as a file, so CI can plan a pull request per device without a daemon.

The file (``KIND``, ``FORMAT`` 1) holds what planning compares and nothing else::

    {"format": 1, "kind": "monitors-status-export", "device": "edge-1",
     "exportedAt": "...", "generation": 7,
     "git": {"ref", "lastAttemptedRevision", "lastAppliedRevision", "error"} | null,
     "revision": {"commit", "dirty"},
     "autopaused": {"<name>": "<reason>"},
     "monitors": {"<name>": {"fingerprint", "configHash", "revision", "origin",
                             "monitor": {...}}}}

``monitor`` is the resolved monitor as ``running.json`` stores it (its pause
included): secrets are ``${NAME}`` references there, never values, and no
observation, condition state, liveness or fire is exported. No printing, no click.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import atomic, errors, settings, timestamps
from reconciler.model import Monitor, MonitorName
from reconciler.state import direrrors
from reconciler.state import registry as registry_mod

KIND = "monitors-status-export"
FORMAT = 1


def document(cfg: settings.Settings) -> dict[str, Any]:
    """The export of this device's running state (``running.json`` and the auto-pauses
    of the state directory; the module docstring gives the shape).

    Raises:
        errors.StateError: the state directory or ``running.json`` cannot be read.
    """
    from reconciler.state import store as store_mod

    with direrrors.state_errors(cfg.state_dir):
        reg = registry_mod.load(cfg.state_dir)
        autopaused = store_mod.Store(cfg.state_dir).autopause_reasons()
    monitors: dict[str, Any] = {}
    for name in sorted(reg.entries):
        entry = reg.entries[name].to_json()
        monitors[name] = {"fingerprint": entry["fingerprint"], "configHash": entry["configHash"],
                          "revision": reg.monitor_revisions.get(name),
                          "origin": _relative(entry["origin"], cfg.root),
                          "monitor": entry["monitor"] | {"origin": _relative(
                              entry["monitor"].get("origin", ""), cfg.root)}}
    return {"format": FORMAT, "kind": KIND, "device": reg.device or cfg.device,
            "exportedAt": timestamps.utc_seconds(), "generation": reg.generation,
            "git": reg.git, "revision": {"commit": reg.commit, "dirty": reg.dirty},
            "autopaused": {str(n): r for n, r in sorted(autopaused.items())},
            "monitors": monitors}


def _relative(origin: str, root: Path) -> str:
    """An origin relative to the repository root: the same in every checkout."""
    prefix = str(root).rstrip("/") + "/"
    return origin[len(prefix):] if origin.startswith(prefix) else origin


def write(cfg: settings.Settings, path: Path) -> dict[str, Any]:
    """Write ``document(cfg)`` to ``path`` (0644, atomically) and return it.

    Raises:
        errors.UsageError: ``path`` cannot be written.
        errors.StateError: as ``document``.
    """
    doc = document(cfg)
    try:
        atomic.write_bytes(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode(),
                           durable=True, mode=0o644)
    except OSError as e:
        raise errors.UsageError(f"{path}: cannot write the export: {e.strerror}") from e
    return doc


@dataclass(frozen=True, slots=True)
class Exported:
    """A read export: the device, its running monitors (origins below ``root``), its
    auto-pauses, generation and git revisions (``git`` None in local mode)."""

    path: Path
    device: str
    running: Mapping[MonitorName, Monitor]
    autopaused: Mapping[MonitorName, str]
    generation: int
    git: Mapping[str, Any] | None


def load(path: Path, root: Path) -> Exported:
    """Read an export written by ``write`` (origins are taken below ``root``).

    Raises:
        errors.UsageError: unreadable, not JSON, or not an export (one line naming it).
    """
    what = f"{path} is not a file written by `monitors status --export`"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise errors.UsageError(f"{path}: cannot read: {e.strerror}") from e
    except (ValueError, RecursionError) as e:
        raise errors.UsageError(f"{what} (not JSON)") from e
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise errors.UsageError(what)
    if not isinstance(doc.get("format"), int) or doc["format"] > FORMAT:
        raise errors.UsageError(f"{path}: export format {doc.get('format')!r} is newer than "
                                f"this version understands ({FORMAT}); upgrade monitors")
    try:
        running: dict[MonitorName, Monitor] = {}
        for name, raw in dict(doc.get("monitors") or {}).items():
            body = dict(raw["monitor"])
            body["origin"] = str(root / str(body.get("origin", "")))
            running[MonitorName(name)] = registry_mod.monitor_from_json(body)
        return Exported(
            path=path, device=str(doc["device"]), running=running,
            autopaused={MonitorName(n): str(r)
                        for n, r in dict(doc.get("autopaused") or {}).items()},
            generation=int(doc.get("generation", 0)),
            git=dict(doc["git"]) if isinstance(doc.get("git"), dict) else None)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise errors.UsageError(f"{what} (malformed: {e!r})") from e
