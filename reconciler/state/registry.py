"""The running registry: what the daemon runs, published as ``<state>/running.json``.

The daemon owns it: after every reconcile it publishes the registry atomically
(temp file, fsync, rename; ``atomic.write_json``). The CLI only reads it.
Besides the running set it is the *applied set*: every entry keeps the full
resolved monitor that was applied, so a file that turns invalid keeps its last
applied valid version running, across daemon restarts too (DESIGN.md §3.7).

On-disk shape (``format`` 1)::

    {
      "format": 1,
      "kind": "monitors-running",
      "generation": 7,                 # bumped by every reconcile that changed something
      "revision": {"commit": "<sha>" | null, "dirty": false},   # applied repo revision
      "git": {"ref": "origin/main", "lastAttemptedRevision": "<sha>",    # git mode only
              "lastAppliedRevision": "<sha>", "error": null},
      "digest": "sha256:...",          # loader digest of the layers last applied
      "appliedAt": "2026-11-29T21:50:00+00:00",
      "device": "build-box-1",
      "daemon": {"pid": 1234, "running": true, "startedAt": "..."},
      "held": [{"name": ..., "reason": ...}],   # changes held back (mass-stop guard)
      "monitors": {
        "<name>": {"fingerprint": "sha256:...", "configHash": "sha256:...",
                   "origin": "monitors.d/x.yml", "generation": 3,
                   "startedAt": "...", "revision": "<sha>",   # git mode: applied from
                   "monitor": {...}}   # monitor_to_json()
      }
    }

A record with a newer ``format`` is refused (``errors.StateError``), never
overwritten blindly; a corrupt file is moved aside and reported.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import atomic, errors
from reconciler.actions import registry as action_types
from reconciler.conditions import lifecycle
from reconciler.conditions import spec as condition_spec
from reconciler.model import (
    DeviceName,
    Fingerprint,
    Monitor,
    MonitorName,
    Pause,
    RateLimit,
    Scope,
)
from reconciler.sources import registry as source_types

FORMAT = 1
KIND = "monitors-running"
FILE_NAME = "running.json"

# Non-identity fields compared for ``~ update`` (changed in place, baseline kept).
UPDATE_FIELDS = ("description", "labels", "rateLimit", "scope", "origin", "device", "devices",
                 "owners", "sharedInput", "allowDuplicate", "lifecycle")


def monitor_to_json(monitor: Monitor) -> dict[str, Any]:
    """A resolved monitor as a JSON-compatible dict (the inverse of ``monitor_from_json``).

    Keys follow the YAML field names (``rateLimit``, ``sharedInput``); paths are strings.
    """
    return {
        "name": monitor.name,
        "source": monitor.source.to_json(),
        "condition": condition_spec.to_json(monitor.condition),
        "action": monitor.action.to_json(),
        "fingerprint": monitor.fingerprint,
        **_other_fields(monitor),
    }


def _other_fields(monitor: Monitor) -> dict[str, Any]:
    """``monitor_to_json``'s fields after the fingerprint (no spec among them)."""
    pause = monitor.pause
    return {
        "scope": monitor.scope.value,
        "origin": str(monitor.origin),
        "line": monitor.line,
        "enabled": monitor.enabled,
        "pause": None if pause is None else {"reason": pause.reason, "until": pause.until,
                                             "author": pause.author, "created": pause.created},
        "overlay": None if monitor.overlay is None else str(monitor.overlay),
        "device": monitor.device,
        "devices": list(monitor.devices),
        "owners": list(monitor.owners),
        "sharedInput": monitor.shared_input,
        "rateLimit": None if monitor.rate_limit is None else {"max": monitor.rate_limit.max,
                                                              "per": monitor.rate_limit.per},
        "labels": dict(monitor.labels),
        "allowDuplicate": monitor.allow_duplicate,
        "description": monitor.description,
        "lifecycle": None if monitor.lifecycle is None else monitor.lifecycle.to_json(),
    }


def monitor_from_json(doc: Mapping[str, Any]) -> Monitor:
    """Rebuild a ``Monitor`` from ``monitor_to_json`` output.

    Raises:
        KeyError, TypeError, ValueError: the mapping is not a serialized monitor.
    """
    pause = doc.get("pause")
    rate = doc.get("rateLimit")
    return Monitor(
        name=MonitorName(str(doc["name"])),
        source=source_types.from_json(doc["source"]),
        condition=condition_spec.normalize(doc["condition"], source_type=""),
        action=action_types.from_json(doc["action"]),
        fingerprint=Fingerprint(str(doc["fingerprint"])),
        scope=Scope(doc.get("scope", "user")),
        origin=Path(str(doc.get("origin", ""))),
        line=int(doc.get("line", 1)),
        enabled=bool(doc.get("enabled", True)),
        pause=None if not pause else Pause(str(pause.get("reason") or ""), pause.get("until"),
                                           str(pause.get("author") or ""),
                                           str(pause.get("created") or "")),
        overlay=Path(doc["overlay"]) if doc.get("overlay") else None,
        device=DeviceName(doc["device"]) if doc.get("device") else None,
        devices=tuple(DeviceName(d) for d in doc.get("devices") or ()),
        owners=tuple(DeviceName(d) for d in doc.get("owners") or ()),
        shared_input=doc.get("sharedInput"),
        rate_limit=None if not rate else RateLimit(int(rate["max"]), float(rate["per"])),
        labels={str(k): str(v) for k, v in (doc.get("labels") or {}).items()},
        allow_duplicate=bool(doc.get("allowDuplicate", False)),
        description=str(doc.get("description", "")),
        lifecycle=lifecycle.from_json(doc.get("lifecycle")),
    )


def update_fields(monitor: Monitor) -> dict[str, Any]:
    """The non-identity fields that an in-place ``~ update`` changes (``UPDATE_FIELDS``;
    none is a spec, so no spec is serialized: ``plan`` hashes these for every monitor)."""
    full = _other_fields(monitor)
    return {key: full[key] for key in UPDATE_FIELDS}


def config_hash(monitor: Monitor) -> str:
    """``sha256:`` over the canonical JSON of ``update_fields(monitor)``: the hash of
    everything besides the fingerprint that the evaluator carries."""
    body = atomic.canonical(update_fields(monitor))
    return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True)
class Entry:
    """One running (applied) monitor.

    Attributes:
        monitor: the resolved monitor as applied.
        generation: the registry generation that last started, replaced or updated it.
        started_at: ISO-8601 UTC time its current evaluator was started.
    """

    monitor: Monitor
    generation: int
    started_at: str

    @property
    def name(self) -> MonitorName:
        """The monitor's name."""
        return self.monitor.name

    @property
    def fingerprint(self) -> Fingerprint:
        """The applied fingerprint."""
        return self.monitor.fingerprint

    def to_json(self) -> dict[str, Any]:
        """The entry as stored under ``monitors.<name>`` in ``running.json``."""
        return {
            "fingerprint": self.monitor.fingerprint,
            "configHash": config_hash(self.monitor),
            "origin": str(self.monitor.origin),
            "generation": self.generation,
            "startedAt": self.started_at,
            "monitor": monitor_to_json(self.monitor),
        }


@dataclass(slots=True)
class Registry:
    """The running registry (mutable; owned by the daemon's reconcile loop).

    Attributes:
        entries: name -> running entry.
        generation: bumped by every reconcile that applied at least one change.
        commit, dirty: the applied revision of the repository (None outside git).
        digest: the loader digest of the layers last applied.
        applied_at: ISO-8601 UTC time of the last reconcile.
        device: this device's name.
        pid: the daemon's pid; ``running`` False once it exited cleanly.
        held: changes held back, as ``{"name", "action", "reason"}`` dicts.
        git: git mode: ``daemon.gitmode.Revisions.to_json()`` (ref, last attempted and
            applied commits, error); None in local mode.
        monitor_revisions: git mode: name -> the commit its running version was
            applied from.
    """

    entries: dict[MonitorName, Entry] = field(default_factory=dict)
    generation: int = 0
    commit: str | None = None
    dirty: bool = False
    digest: str = ""
    applied_at: str = ""
    device: str = ""
    pid: int | None = None
    running: bool = False
    daemon_started_at: str = ""
    held: list[dict[str, str]] = field(default_factory=list)
    git: dict[str, Any] | None = None
    monitor_revisions: dict[MonitorName, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The registry in its on-disk shape (module docstring)."""
        monitors = {}
        for name in sorted(self.entries):
            monitors[name] = self.entries[name].to_json()
            if name in self.monitor_revisions:
                monitors[name]["revision"] = self.monitor_revisions[name]
        doc = {
            "format": FORMAT,
            "kind": KIND,
            "generation": self.generation,
            "revision": {"commit": self.commit, "dirty": self.dirty},
            "digest": self.digest,
            "appliedAt": self.applied_at,
            "device": self.device,
            "daemon": {"pid": self.pid, "running": self.running,
                       "startedAt": self.daemon_started_at},
            "held": list(self.held),
            "monitors": monitors,
        }
        if self.git is not None:
            doc["git"] = dict(self.git)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Registry:
        """Parse the on-disk shape.

        Raises:
            errors.StateError: a newer format, or a malformed document.
        """
        version = doc.get("format")
        if not isinstance(version, int) or version > FORMAT:
            raise errors.StateError(
                f"{FILE_NAME}: format {version!r} is newer than this version understands "
                f"({FORMAT}); upgrade monitors (the file is kept as is)")
        try:
            revision = doc.get("revision") or {}
            daemon = doc.get("daemon") or {}
            entries: dict[MonitorName, Entry] = {}
            revisions: dict[MonitorName, str] = {}
            for name, raw in (doc.get("monitors") or {}).items():
                if isinstance(raw.get("revision"), str):
                    revisions[MonitorName(name)] = raw["revision"]
                monitor = monitor_from_json(raw["monitor"])
                entries[MonitorName(name)] = Entry(monitor, int(raw.get("generation", 0)),
                                                   str(raw.get("startedAt", "")))
            return cls(
                entries=entries,
                generation=int(doc.get("generation", 0)),
                commit=revision.get("commit"),
                dirty=bool(revision.get("dirty", False)),
                digest=str(doc.get("digest", "")),
                applied_at=str(doc.get("appliedAt", "")),
                device=str(doc.get("device", "")),
                pid=daemon.get("pid"),
                running=bool(daemon.get("running", False)),
                daemon_started_at=str(daemon.get("startedAt", "")),
                held=[dict(h) for h in doc.get("held") or []],
                git=dict(doc["git"]) if isinstance(doc.get("git"), dict) else None,
                monitor_revisions=revisions,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise errors.StateError(f"{FILE_NAME}: malformed running registry: {e!r}") from e


def path(state_dir: Path) -> Path:
    """``<state>/running.json``."""
    return state_dir / FILE_NAME


def load(state_dir: Path) -> Registry:
    """Read ``<state>/running.json``; a missing file is an empty registry.

    A file that is not JSON (torn by a crash that did not use ``publish``, or
    hand-edited) is moved aside to ``running.json.corrupt-<n>`` and an empty
    registry returned; the caller should report ``quarantined`` (see ``load_checked``).

    Raises:
        errors.StateError: a newer format (the file is left untouched).
    """
    return load_checked(state_dir)[0]


def load_checked(state_dir: Path) -> tuple[Registry, str | None]:
    """Like ``load`` but also return a one-line note when the file was quarantined."""
    file = path(state_dir)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Registry(), None
    except OSError as e:
        raise errors.StateError(f"{file}: cannot read: {e.strerror}") from e
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    except ValueError:
        n = 0
        while (aside := file.with_name(f"{FILE_NAME}.corrupt-{n}")).exists():
            n += 1
        try:
            os.replace(file, aside)
        except OSError as e:  # a read-only state directory: report, never trace back
            return Registry(), (f"{file}: corrupt running registry (taken as empty; cannot "
                                f"move it aside: {e.strerror or e})")
        return Registry(), f"{file}: corrupt running registry moved aside to {aside.name}"
    return Registry.from_json(doc), None


def publish(state_dir: Path, registry: Registry) -> None:
    """Write ``<state>/running.json`` atomically and durably (temp, fsync, rename, dir fsync).

    Raises:
        OSError: the state directory is not writable.
    """
    atomic.make_dirs(state_dir)
    atomic.write_json(path(state_dir), registry.to_json(), durable=True)
