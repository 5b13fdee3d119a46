"""What each MCP tool does, without the SDK: plain functions of the repository's
``Settings`` and the tool's (already schema-checked) arguments, returning compact
JSON-ready dicts.

They reuse the CLI's cores (``client.create`` for add's checks and write,
``client.handover.apply`` for apply, ``client.views`` for list/view,
``daemon.testrun`` for test, ``config.authoring`` for remove and overlays): what an
agent creates is a reviewable YAML file in ``monitors.d/``, never hidden state.

Errors: ``errors.UsageError``/``NotFoundError``/``ConfigError`` are refusals the caller
caused (``Conflict`` a stale generation); anything else of ``errors.MonitorsError``
is an error. Every message is one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from reconciler import errors
from reconciler.settings import Settings

DOC_KEYS = ("description", "source", "condition", "action", "until", "stopAfter", "stopWhen",
            "device", "devices", "sharedInput", "rateLimit", "labels")
"""The monitor document's fields a tool takes (``schemas/monitor.schema.json``)."""

WAIT = 30.0
"""Seconds ``monitor_watch``/``monitor_update`` wait for the first poll by default."""

LOCK_FILE = "authoring.lock"
"""``<state>/authoring.lock``: held while a tool compares and writes monitor files."""

IN_FLIGHT = frozenset({"pending", "dispatched"})
"""Fire statuses of an action still in flight (``actions.records``)."""


class Conflict(errors.UsageError):
    """``monitor_update`` was given a generation that is no longer the file's.

    Attributes:
        current: the file's generation now (None: the file is gone).
    """

    def __init__(self, message: str, current: str | None) -> None:
        super().__init__(message)
        self.current = current


@contextlib.contextmanager
def authoring_lock(settings: Settings) -> Iterator[None]:
    """Serialize compare-and-write across processes (``flock`` on ``<state>/authoring.lock``):
    two servers, or a server and itself, never interleave a check and a write.

    Raises:
        errors.StateError: the lock file cannot be created.
    """
    path = settings.state_dir / LOCK_FILE
    try:
        settings.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise errors.StateError(f"{path}: cannot open the authoring lock: {e.strerror}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _doc(args: Mapping[str, Any]) -> dict[str, Any]:
    """The monitor document in a tool's arguments (``DOC_KEYS``), schema-checked.

    Raises:
        errors.UsageError: ``field: message`` of the first schema error.
    """
    from reconciler.config.authoring import adddoc

    doc = {k: args[k] for k in DOC_KEYS if args.get(k) is not None}
    adddoc.check_schema({"name": args["name"], **doc})
    return doc


def _monitor(name: str, doc: Mapping[str, Any]) -> Any:
    from reconciler.config import normalize

    try:
        return normalize.monitor(dict(doc), name=name)
    except (KeyError, TypeError, ValueError) as e:
        raise errors.UsageError(f"{name}: not a valid monitor: {e}") from None


def _apply(settings: Settings, name: str, wait: float, *, written: str) -> dict[str, Any]:
    """Apply at once (starting the daemon when it is down, as ``add --apply``) and say
    how the first poll of ``name`` went: ``{"status", "detail"}`` or None.

    Raises:
        errors.MonitorsError: the apply failed; the message says that ``written`` (what
            the tool changed) is in place all the same.
    """
    from reconciler.client import handover

    try:
        report = handover.apply(settings, wait=wait)
    except errors.MonitorsError as e:
        raise type(e)(f"{written}, but it was not applied: {e}") from None
    mine = next((m for m in report.monitors if m.name == name), None)
    return {"startedDaemon": report.started_daemon, "generation": report.generation,
            "firstPoll": {"status": mine.status, "detail": mine.detail} if mine else None}


def _liveness(settings: Settings, name: str) -> dict[str, Any] | None:
    from reconciler.client import views

    row = next((r for r in views.rows(settings)["monitors"] if r["name"] == name), None)
    if row is None:
        return None
    return {"status": row["status"], "text": row["livenessText"],
            "lastCheckedAt": row["liveness"].get("lastCheckedAt"),
            "lastError": row["liveness"].get("lastError"), "owner": row["owner"]}


def watch(settings: Settings, args: Mapping[str, Any], *, by: str) -> dict[str, Any]:
    """``monitor_watch``: create-only. Refuses a taken name and an existing behaviour
    here or on a reachable peer (naming it); writes ``monitors.d/NAME.yml`` through
    add's code (lint included); applies; waits for the first poll.

    Returns:
        ``{"name", "file", "generation", "firstPoll": {"status", "detail"} | None,
        "liveness", "startedDaemon": pid | None}``.
    """
    from reconciler.client import create
    from reconciler.config import generation, loader
    from reconciler.config.authoring import arguments

    name = str(args["name"])
    arguments.check_name(name)
    doc = _doc(args)
    with authoring_lock(settings):
        create.check_new(settings, _monitor(name, doc), loaded=loader.load(settings),
                         hint="pick another name")
        written = create.write(settings, name, doc, command=f"monitor_watch (MCP, {by})")
    file, gen = written.path.relative_to(settings.root), generation.of_file(written.path)
    applied = _apply(settings, name, float(args.get("wait", WAIT)),
                     written=f"wrote {file} (generation {gen})")
    return {"name": name, "file": str(file), "generation": gen,
            "firstPoll": applied["firstPoll"], "liveness": _liveness(settings, name),
            "startedDaemon": applied["startedDaemon"]}


def _in_flight(settings: Settings, name: str) -> list[str]:
    """Ids of ``name``'s fires whose action is still in flight (pending, dispatched)."""
    from reconciler.state import store as store_mod

    store = store_mod.Store(settings.state_dir, readonly=True)
    return [str(f.get("id")) for f in store.fires(name, limit=20)
            if str(f.get("status", "pending")) in IN_FLIGHT]


def update(settings: Settings, args: Mapping[str, Any], *, by: str) -> dict[str, Any]:
    """``monitor_update``: replace the user file of ``name`` with the given definition,
    only if its generation is still ``args["generation"]`` (compare-and-replace under
    ``authoring_lock``); then apply and wait for the first poll.

    Raises:
        Conflict: the file changed since that generation (nothing written).
        errors.UsageError: a built-in (no user file), an action in flight, a duplicate.
        errors.NotFoundError: no monitor of that name.
    """
    from reconciler.client import create
    from reconciler.config import generation, loader
    from reconciler.config.authoring import locate

    name = str(args["name"])
    expected = str(args["generation"])
    doc = _doc(args)
    with authoring_lock(settings):
        loaded = loader.load(settings)
        found = locate.find(settings, name, loaded=loaded)
        if found.user is None:
            if found.system is not None:
                raise errors.UsageError(
                    f"{name} is a built-in ({locate.shown(settings, found.system)}): it has "
                    "no user file to update; pause it, or watch a copy under another name")
            raise errors.NotFoundError(f"no monitor named {name!r}")
        current = generation.of_file(found.user)
        if current != expected:
            raise Conflict(f"{name} changed since generation {expected}: it is now at "
                           f"generation {current}; read it again (monitor_inspect)", current)
        busy = _in_flight(settings, name)
        if busy:
            raise errors.UsageError(f"{name} has an action in flight (fire {busy[0]}); "
                                    "update it when the action has finished")
        create.check_new(settings, _monitor(name, doc), loaded=loaded, replacing=True,
                         hint="change the behaviour")
        written = create.write(settings, name, doc, path=found.user,
                               command=f"monitor_update (MCP, {by})")
    file, gen = written.path.relative_to(settings.root), generation.of_file(written.path)
    applied = _apply(settings, name, float(args.get("wait", WAIT)),
                     written=f"wrote {file} (generation {gen})")
    return {"name": name, "file": str(file), "previousGeneration": expected, "generation": gen,
            "firstPoll": applied["firstPoll"], "liveness": _liveness(settings, name)}


def listing(settings: Settings) -> dict[str, Any]:
    """``monitor_list``: one compact row per monitor known here."""
    from reconciler.client import views

    data = views.rows(settings)
    return {"device": data["device"], "daemonRunning": data["daemon"]["running"],
            "monitors": [{"name": r["name"], "builtin": r["builtin"], "status": r["status"],
                          "generation": r["generation"], "source": r["source"],
                          "condition": r["condition"], "action": r["action"],
                          "liveness": r["livenessText"], "labels": r["labels"]}
                         for r in data["monitors"]],
            "problems": data["problems"]}


def inspect(settings: Settings, args: Mapping[str, Any]) -> dict[str, Any]:
    """``monitor_inspect``: config, liveness, recent fires, lifecycle, generation and
    the stop reason. A monitor stopped by ``monitor_stop`` whose file is gone is
    still answered (``status: stopped`` with its reason).

    Raises:
        errors.NotFoundError: never defined here and never stopped.
    """
    from reconciler.client import views
    from reconciler.state import store as store_mod

    name = str(args["name"])
    store = store_mod.Store(settings.state_dir, readonly=True)
    stopped = store.stopped(name) if (settings.state_dir / "monitors").is_dir() else None
    try:
        data = views.view(settings, name, fires=int(args.get("fires", 5)))
    except errors.NotFoundError:
        if stopped is None:
            raise
        return {"name": name, "status": "stopped", "generation": None,
                "stopped": _stop_json(stopped)}
    live = data["liveness"]
    return {"name": name, "builtin": data["builtin"], "status": data["status"],
            "reason": data.get("reason"), "generation": data["generation"],
            "fingerprint": data["fingerprint"], "origin": data["origin"],
            "owner": data["owner"], "config": data["config"],
            "liveness": {"text": data["livenessText"],
                         **{k: live.get(k) for k in ("status", "lastCheckedAt", "checkCount",
                                                     "lastError", "consecutiveErrors",
                                                     "lastFiredAt", "fireCount")}},
            "lifecycle": store.lifecycle(name),
            "recentFires": [
                {**{k: f.get(k) for k in ("id", "status", "createdAt", "finishedAt", "action",
                                          "reason", "attempts", "exitCode") if k in f},
                 "why": (f.get("event") or {}).get("reason")}
                for f in data["recentFires"]],
            "stopped": _stop_json(stopped) if stopped else None}


def _stop_json(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: record.get(k) for k in ("reason", "at", "by", "action")}


def test(settings: Settings, args: Mapping[str, Any]) -> dict[str, Any]:
    """``monitor_test``: one dry evaluation (``monitors test --json``'s answer)."""
    from reconciler.daemon import testrun

    monitor, known = testrun.find(settings, str(args["name"]))
    result = testrun.dry_run(settings, monitor, known)
    preview = (testrun.action_preview(result.monitor, result.event)
               if result.event is not None else None)
    return testrun.as_json(result, preview)


def redactor(settings: Settings) -> Any:
    """The redactor of the secrets the layers and monitors.toml reference (as the daemon
    registers them); an empty one when the layers cannot be read."""
    from reconciler import redaction
    from reconciler.config import loader

    try:
        monitors = list(loader.load(settings).monitors.values())
    except errors.MonitorsError:
        monitors = []
    return redaction.Redactor(redaction.collect(monitors, settings.toml, os.environ))


def stop(settings: Settings, args: Mapping[str, Any], *, by: str) -> dict[str, Any]:
    """``monitor_stop``: remove a user monitor's file (a built-in is paused through an
    overlay instead), record ``reason`` in the state (``stopped.json``), apply.

    Raises:
        errors.NotFoundError: no monitor of that name.
    """
    from reconciler.config import gitworktree, loader
    from reconciler.config.authoring import arguments, locate, overlayedit, userfiles
    from reconciler.state import store as store_mod

    name = str(args["name"])
    # redacted before it reaches disk (and while the stopped monitor's secrets are known)
    reason = redactor(settings).redact(str(args["reason"]))
    with authoring_lock(settings):
        loaded = loader.load(settings)
        found = locate.find(settings, name, loaded=loaded)
        if found.user is not None:
            removed = userfiles.remove(settings, name, loaded=loaded)
            action, path = "removed", removed.path
        elif found.system is not None:
            [paused] = overlayedit.pause(
                settings, [name], reason=f"stopped: {reason}", until=None,
                author=gitworktree.author(settings),
                command=arguments.command_line(["pause", name, "--reason", reason]))
            action, path = "paused", paused.path
        else:
            raise errors.NotFoundError(f"no monitor named {name!r}")
    store_mod.Store(settings.state_dir).set_stopped(name, reason=reason, by=by, action=action,
                                                    at=time.time())
    applied = _apply(settings, name, 0.0, written=f"{action} {name}")
    return {"name": name, "action": action, "file": str(Path(path).relative_to(settings.root)),
            "reason": reason, "daemonGeneration": applied["generation"]}


def pause(settings: Settings, args: Mapping[str, Any]) -> dict[str, Any]:
    """``monitor_pause``: a pause overlay with ``reason`` and ``until`` (a duration or
    an ISO time; absent: until resumed), then apply."""
    from reconciler.config import gitworktree, loader
    from reconciler.config.authoring import arguments, overlayedit

    name = str(args["name"])
    until = args.get("until")
    reason = args.get("reason")
    with authoring_lock(settings):
        names = overlayedit.targets(settings, name=name, labels=(),
                                    loaded=loader.load(settings))
        words = ["pause", name, *(["--until", until] if until else []),
                 *(["--reason", reason] if reason is not None else [])]
        [done] = overlayedit.pause(settings, names, reason=reason,
                                   until=overlayedit.until_arg(until or "never"),
                                   author=gitworktree.author(settings),
                                   command=arguments.command_line(words))
    applied = _apply(settings, name, 0.0, written=f"paused {name}")
    return {"name": name, "paused": True, "until": done.pause.until,
            "reason": done.pause.reason, "overlay": str(done.path.relative_to(settings.root)),
            "daemonGeneration": applied["generation"]}


def resume(settings: Settings, args: Mapping[str, Any]) -> dict[str, Any]:
    """``monitor_resume``: remove the overlay's pause and clear a rate-limit auto-pause,
    then apply."""
    from reconciler.client import control
    from reconciler.config import loader, writer
    from reconciler.config.authoring import arguments, overlayedit
    from reconciler.state import store as store_mod

    name = str(args["name"])
    with authoring_lock(settings):
        overlayedit.targets(settings, name=name, labels=(), loaded=loader.load(settings))
        had_pause = isinstance(overlayedit.current_overlay(settings, name).get("pause"), dict)
        if had_pause:
            writer.write_overlay(settings, name, pause=None,
                                 command=arguments.command_line(["resume", name]))
    store = store_mod.Store(settings.state_dir)
    auto = None
    if store.monitor_dir(name).is_dir():
        auto = store.autopause(name)
        store.clear_stopped(name)  # a built-in stopped (paused) by monitor_stop runs again
    if auto:
        if control.status(settings.state_dir) is not None:
            control.clear_autopause(settings.state_dir, name)
        store.clear_autopause(name)
    applied = _apply(settings, name, 0.0, written=f"resumed {name}")
    return {"name": name, "resumed": bool(had_pause or auto), "pauseRemoved": had_pause,
            "autopauseCleared": bool(auto), "daemonGeneration": applied["generation"]}
