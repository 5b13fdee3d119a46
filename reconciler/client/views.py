"""Operator views (``list``, ``view``, ``runs``, ``logs``): rows as JSON-ready dicts.

Reads the layers, the running registry and the state store; never writes (the
store creates nothing on reads) and never prints. Renderers in
``render.monitors`` turn the rows into text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from reconciler import errors, settings, snapshot
from reconciler.client import control as client
from reconciler.conditions import registry as condition_registry
from reconciler.conditions.spec import Condition
from reconciler.config import generation
from reconciler.daemon import protocol
from reconciler.model import ActionSpec, Monitor, MonitorName
from reconciler.state import direrrors
from reconciler.state import registry as registry_mod


def _store(cfg: settings.Settings) -> Any:
    from reconciler.state import store as store_mod

    return store_mod.Store(cfg.state_dir)


def describe_source(source: Any) -> str:
    """``poll: git rev-parse HEAD every 30s`` and friends (one line; ``sources.registry``)."""
    return str(source.describe())


def describe_condition(condition: Condition) -> str:
    """``on-change``, ``match /fail/``, ``every`` (the mode module's ``describe``)."""
    return condition_registry.describe(condition)


def describe_action(action: ActionSpec) -> str:
    """``notify log``, ``run claude``, ``routine deploy``, ``webhook-out https://...``
    (the type module's ``describe``)."""
    return action.describe()


def _row(name: MonitorName, monitor: Monitor, *, status: str, owner: str, placement: str,
         store: Any, now: float, owned: bool, error: str | None = None,
         note: str | None = None, evaluating: bool = True,
         refused: str | None = None,
         write_error: dict[str, Any] | None = None,
         link: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from reconciler.state import store as store_mod

    autopause = store.autopause(name)
    # Fire counts come from the fire records, never from the coalesced liveness file.
    tally = {k: v for k, v in store.fire_tally(name).items() if v is not None}
    liveness = {**(store.liveness(name) or {}), **tally}
    # STALLED is for a running evaluator that stopped checking: never for a monitor
    # that is paused, auto-paused, refused or not run by a daemon.
    live = store_mod.liveness_view(liveness, monitor, now, owned=owned,
                                   running=evaluating and not autopause and not refused,
                                   write_error=write_error)
    text = live["text"]
    if refused:
        text = f"refused: {refused}" + (f" · {text}" if live["status"] != "never" else "")
    elif status == "auto-paused" and autopause:
        text = f"auto-paused: {autopause.get('reason', '')} · {text}"
    elif status in ("paused", "disabled", "elsewhere"):
        text = f"{status} · {text}" if live["status"] != "never" else status
    if live["fireCount"] and "fired" not in text:
        text += f" · fired {live['fireCount']}x"
    if link and evaluating:  # a connection stream (ws): connected / reconnecting
        state = str(link.get("state"))
        shown = f"{state} ({link['error']})" if link.get("error") and state != "connected" \
            else state
        text = shown if live["status"] == "never" else f"{shown} · {text}"
    if note:
        text = f"{text} · {note}"
    if error:
        text = f"{text} · file error: {error}"
    return {
        "name": name,
        "scope": monitor.scope.value,
        "builtin": monitor.scope.value == "system",
        "origin": str(monitor.origin),
        "fingerprint": monitor.fingerprint,
        "generation": generation.of_file(monitor.origin) if str(monitor.origin) else None,
        "source": describe_source(monitor.source),
        "condition": describe_condition(monitor.condition),
        "action": describe_action(monitor.action),
        "owner": owner,
        "placement": placement,
        "status": status,
        "liveness": live,
        "livenessText": text,
        "fires": live["fireCount"],
        "autopause": autopause,
        "error": error,
        "labels": dict(monitor.labels),
    }


def rows(cfg: settings.Settings, *,
         status: Mapping[str, Any] | Literal["ask"] | None = "ask") -> dict[str, Any]:
    """Every monitor known here (valid, invalid-but-applied, running) with liveness.

    Args:
        status: the daemon's ``status`` reply; ``"ask"`` (default) asks the daemon
            over the control socket. The daemon's HTTP API passes its own.

    Returns:
        ``{"device", "daemon": {"running", "pid", "generation", "git"}, "problems":
        [lines], "monitors": [row, ...]}`` sorted by name. ``daemon.git`` is the
        followed ref's revisions in git mode (``protocol.GitRevisions``; from
        ``running.json`` when the daemon is not running), else None; each row's
        ``revision`` is the commit its running version was applied from.
    """
    with direrrors.state_errors(cfg.state_dir):
        return _rows(cfg, client.status(cfg.state_dir) if status == "ask" else status)


def _snapshot(cfg: settings.Settings, reg: registry_mod.Registry,
              applied: dict[MonitorName, Monitor], autopaused: dict[MonitorName, str],
              completed: dict[MonitorName, tuple[str, str]]) -> snapshot.Snapshot:
    """The layers as the rows show them: the working tree, or in git mode the last
    applied commit (what runs; the working tree is what ``plan`` shows)."""
    from reconciler.config import gitfollow

    commit = (reg.git or {}).get("lastAppliedRevision")
    at = gitfollow.applied_settings(cfg, commit)
    if at is None or commit is None:
        return snapshot.read(cfg, last_good=applied, autopaused=autopaused,
                             completed=completed, with_git=False)
    snap = snapshot.read(at, last_good=applied, autopaused=autopaused, completed=completed,
                         with_git=False)
    return snapshot.at_commit(snap, at.root, cfg.root, commit)


def _rows(cfg: settings.Settings, status: Mapping[str, Any] | None) -> dict[str, Any]:
    reg = registry_mod.load(cfg.state_dir)
    applied = {n: e.monitor for n, e in reg.entries.items()}
    store = _store(cfg)
    autopaused = {MonitorName(n): "auto-paused" for n in store.names() if store.autopause(n)}
    snap = _snapshot(cfg, reg, applied, autopaused, store.completions())
    now = time.time()
    out: list[dict[str, Any]] = []
    desired, excluded, invalid = snap.desired.monitors, snap.desired.excluded, \
        snap.desired.invalid
    duplicates = snap.desired.duplicates
    held = {str(h.get("name")) for h in (status.get("held") or [])} if status else set()
    write_errors: dict[str, Any] = (status.get("writeErrors") or {}) if status else {}
    links: dict[str, Any] = (status.get("streams") or {}) if status else {}
    names = set(snap.monitors) | set(desired) | set(excluded) | set(applied)
    for name in sorted(names):
        monitor = snap.monitors.get(name) or desired.get(name) or applied.get(name)
        if monitor is None:
            continue
        placed = snap.placements.get(name)
        owner = (placed.owner or ("this device" if placed.runs_here else "-")) if placed \
            else cfg.device
        where = placed.reason if placed else ""
        if monitor.owners and placed is not None and placed.runs_here:
            owner = protocol.owner_role(status, name)
        error = invalid.get(name)
        why = excluded.get(name)
        note = duplicates.get(name) or (why.reason if why and why.kind == "duplicate" else None)
        running = status is not None and name in applied
        refused = store.refusal(name) if why is None else None
        if why is not None:
            state = {"disabled": "disabled", "paused": "paused", "elsewhere": "elsewhere",
                     "autopaused": "auto-paused", "invalid": "invalid",
                     "completed": why.reason,
                     "duplicate": "duplicate (held)"}.get(why.kind, why.kind)
            if running and name in held:
                state += " (stop HELD: still running)"
        elif name in desired:
            state = "running" if running else "not running"
            if name in duplicates:
                state = "kept (duplicate)" if running else "duplicate (last applied version)"
            elif error:
                state = "kept (file invalid)" if running else "invalid (last applied version)"
        elif running and name in held:
            state = "removed (stop HELD: still running)"
        else:
            state = "stopping"
        if refused and state in ("running", "not running"):
            state = "refused"
        row = _row(name, monitor, status=state, owner=owner, placement=where, store=store,
                   now=now, owned=bool(placed.runs_here) if placed else True, error=error,
                   note=note, evaluating=running and why is None, refused=refused,
                   write_error=write_errors.get(name), link=links.get(name))
        row["revision"] = reg.monitor_revisions.get(name) if running else None
        if why is not None or note:
            row["reason"] = why.reason if why is not None else note
        elif refused:
            row["reason"] = refused
        out.append(row)
    return {
        "device": cfg.device,
        "daemon": {"running": status is not None,
                   "pid": status.get("pid") if status else None,
                   "device": status.get("device") if status else None,
                   "generation": status.get("generation") if status else reg.generation,
                   "held": status.get("held") if status else [],
                   "settingsMismatch": client.settings_mismatch(cfg, status),
                   "git": (status.get("git") if status else None) or reg.git,
                   "owners": status.get("owners") if status else None},
        "problems": list(snap.errors),
        "storeProblems": list(store.problems),
        "monitors": out,
    }


def status(cfg: settings.Settings) -> dict[str, Any]:
    """``monitors status``: the daemon's status reply (``protocol.StatusReply``) with
    ``running`` True, or, with the daemon stopped, what ``running.json`` last recorded.

    Returns:
        ``{"running", "device", "pid", "generation", "revision", "git", "monitors",
        "problems", "lastReconcile"}``; ``git`` is ``protocol.GitRevisions`` in git mode.

    Raises:
        errors.StateError: the state directory or ``running.json`` cannot be read.
    """
    with direrrors.state_errors(cfg.state_dir):
        reply = client.status(cfg.state_dir)
        reg = registry_mod.load(cfg.state_dir)
    if reply is not None:
        return {"running": True, "device": reply.get("device"), "pid": reply.get("pid"),
                "generation": reply.get("generation"), "revision": reply.get("revision"),
                "git": reply.get("git"), "monitors": list(reply.get("running") or []),
                "problems": list(reply.get("problems") or []),
                "lastReconcile": reply.get("lastReconcile")}
    return {"running": False, "device": reg.device or cfg.device, "pid": None,
            "generation": reg.generation,
            "revision": {"commit": reg.commit, "dirty": reg.dirty}, "git": reg.git,
            "monitors": sorted(reg.entries), "problems": [], "lastReconcile": None}


def view(cfg: settings.Settings, name: str, *, fires: int = 10,
         status: Mapping[str, Any] | Literal["ask"] | None = "ask") -> dict[str, Any]:
    """One monitor in full: resolved config, origin, scope, fingerprint, liveness,
    condition state, running entry and recent fires (``status``: as for ``rows``).

    Raises:
        errors.NotFoundError: no layer defines ``name`` and it is not running.
    """
    listing = rows(cfg, status=status)
    row = next((r for r in listing["monitors"] if r["name"] == name), None)
    if row is None:
        stopped = _stopped(cfg, name)
        if stopped:
            raise errors.NotFoundError(
                f"{name} was stopped {stopped.get('at')} by {stopped.get('by')}: "
                f"{stopped.get('reason')} (its file was {stopped.get('action')})")
        raise errors.NotFoundError(f"no monitor named {name!r} on this device (see "
                                   "`monitors list`)")
    reg = registry_mod.load(cfg.state_dir)
    entry = reg.entries.get(MonitorName(name))
    from reconciler.config import gitfollow, loader

    at = gitfollow.applied_settings(cfg, (reg.git or {}).get("lastAppliedRevision"))
    if at is not None:  # git mode: the applied commit's version, origin as in the repository
        snap = _snapshot(cfg, reg, {n: e.monitor for n, e in reg.entries.items()}, {}, {})
        found = snap.monitors.get(MonitorName(name))
    else:
        found = loader.load(cfg).monitors.get(MonitorName(name))
    monitor = found or (entry.monitor if entry else None)
    store = _store(cfg)
    applied = (entry.to_json() | {"monitor": None,
                                  "revision": reg.monitor_revisions.get(MonitorName(name))}
               if entry else None)
    daemon_running = bool(listing["daemon"]["running"])
    from reconciler.state import records

    try:
        state = store.read_state(name)
    except records.FutureVersionError:
        state = None  # the row's ``reason`` says why (refused); kept untouched
    return {
        **row,
        "config": registry_mod.monitor_to_json(monitor) if monitor else None,
        "running": applied if daemon_running else None,
        "lastApplied": applied,
        "state": state,
        "recentFires": store.fires(name, limit=fires),
        "stopped": _stopped(cfg, name),
    }


def _stopped(cfg: settings.Settings, name: str) -> dict[str, Any] | None:
    """The stop record of ``name`` (``monitor_stop``), or None."""
    store = _store(cfg)
    try:
        if not store.monitor_dir(name).is_dir():
            return None
    except errors.StateError:  # a name the state store refuses (``../x``) was never stopped
        return None
    record = store.stopped(name)
    return dict(record) if record else None


def runs(cfg: settings.Settings, name: str, *, limit: int = 20) -> list[dict[str, Any]]:
    """The fire history of ``name``, newest first (fire records).

    Raises:
        errors.NotFoundError: no monitor is named ``name`` (also when ``name`` cannot
            be one: ``../x``, ``a/b``, a leading dot, which the state store refuses).
    """
    store = _store(cfg)
    try:
        directory = store.monitor_dir(name)
    except errors.StateError:  # not a usable name: the client's unknown name
        raise errors.NotFoundError(f"no monitor named {name!r} (see `monitors list`)") from None
    if not directory.is_dir():
        _known_or_raise(cfg, name)
        return []
    return list(store.fires(name, limit=limit))


def logs(cfg: settings.Settings, name: str, *, limit: int = 5) -> list[dict[str, Any]]:
    """Action output of the latest fires: ``[{"id", "status", "file", "output"}]``."""
    from reconciler.actions.records import OUTPUT_FILE

    store = _store(cfg)
    out = []
    for record in runs(cfg, name, limit=limit):
        event_id = str(record.get("id", ""))
        output_name = str(record.get("output") or OUTPUT_FILE)
        path: Path = store.fire_dir(name, event_id) / output_name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = None
        details = {k: record[k] for k in ("action", "attempts", "channels", "exitCode",
                                          "httpStatus", "durationSeconds", "reasons")
                   if record.get(k) not in (None, [], "")}
        out.append({"id": event_id, "status": record.get("status"), "file": str(path),
                    "output": text, "reason": record.get("reason"), "details": details})
    return out


def _known_or_raise(cfg: settings.Settings, name: str) -> None:
    from reconciler.config import loader

    result = loader.load(cfg)
    if MonitorName(name) not in result.monitors and MonitorName(name) not in result.invalid:
        raise errors.NotFoundError(f"no monitor named {name!r} (see `monitors list`)")
