"""The control protocol: typed requests and replies, shared by the daemon and its clients.

The wire (README, "Control API"): a unix socket ``<state>/control.sock`` (mode
0600), one request per connection, UTF-8 JSON, one object per line::

    client -> {"op": "status"}\\n
    daemon -> {"ok": true, ...}\\n            (or {"ok": false, "error": "one line"})

A request is one of the frozen dataclasses below (``Request``); ``encode`` gives its
wire object and ``decode`` checks and parses one (the daemon's side), so no module
builds or reads a request dict by hand. Replies are the ``TypedDict``s below: JSON
objects on the wire, typed on both sides.

Operations:

``status`` (``Status``) -> ``StatusReply``
    ``settingsDigest`` is ``settings_digest`` of the monitors.toml the daemon runs
    with (``client.control.settings_mismatch`` compares it). ``git`` (``GitRevisions``)
    is null in local mode; in git mode it holds ``lastAttemptedRevision``,
    ``lastAppliedRevision`` and the last git ``error``. ``endpoints`` names what else
    it serves with the bound address (``{"http": "http://127.0.0.1:8765"}``).
``reconcile`` (``Reconcile``: ``{"allowMassStop", "wait", "names"}``) -> ``ReconcileReply``
    Reconcile now (load the layers, plan, apply), then wait up to ``wait`` seconds
    for the first poll of every started or replaced evaluator and of ``names``.
``first-polls`` (``FirstPolls``: ``{"names", "wait"}``) -> ``FirstPollsReply``
    Wait up to ``wait`` seconds for the first poll of the named running monitors,
    naming only monitors that run (a name left out is not running on this device).
``evaluate-now`` (``EvaluateNow``: ``{"names": [names] | null, "wait"}``) -> ``EvaluateNowReply``
    Poll the named running monitors (all when null) once, now, out of schedule.
``clear-autopause`` (``ClearAutopause``: ``{"name"}``) -> ``ClearAutopauseReply``
    Clear a rate-limit auto-pause in running state (``monitors resume``), then reconcile.

Arguments are checked by ``decode`` before the daemon sees a request: a wrong type
is ``BadRequest("wait: expected a number of seconds")``; ``wait`` is at most
``durations.MAX_SECONDS``. No I/O here beyond resolving the socket path.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, NotRequired, TypedDict

from reconciler import durations, settings

SOCKET_NAME = "control.sock"

WAIT_ERROR = "wait: expected a number of seconds"
WAIT_TOO_LONG = f"wait: at most {int(durations.MAX_SECONDS)} seconds (3650d)"
OPS = ("status", "reconcile", "first-polls", "evaluate-now", "clear-autopause")


def socket_path(state_dir: Path) -> Path:
    """``<state>/control.sock`` (may be a symlink to a private socket; see ``daemon.control``)."""
    return state_dir / SOCKET_NAME


def connect_path(state_dir: Path) -> str:
    """The path a client connects to (the symlink's target for long state paths)."""
    path = socket_path(state_dir)
    try:
        if path.is_symlink():
            return os.readlink(path)
    except OSError:  # vanished or unreadable: connecting to the link itself then fails
        pass
    return str(path)


def settings_digest(cfg: settings.Settings) -> str:
    """``sha256:`` over the canonical JSON of the parsed monitors.toml (``cfg.toml``).

    Comments, blank lines and key order do not change it; any value does (TOML
    dates are hashed as their ISO text). The daemon reports the digest of the
    monitors.toml it loaded at start in ``status`` as ``settingsDigest``.
    """
    body = json.dumps(dict(cfg.toml), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=str).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


# -- requests -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Status:
    """``{"op": "status"}``."""

    op: ClassVar[str] = "status"


@dataclass(frozen=True, slots=True)
class Reconcile:
    """``{"op": "reconcile", "wait", "names", "allowMassStop"}``.

    Attributes:
        wait: seconds to wait for first polls after applying (0: do not wait).
        names: monitors whose first poll to wait for besides the ones started now.
        allow_mass_stop: carry out stops the mass-stop guard would hold.
    """

    op: ClassVar[str] = "reconcile"
    wait: float = 0.0
    names: tuple[str, ...] = ()
    allow_mass_stop: bool = False


@dataclass(frozen=True, slots=True)
class FirstPolls:
    """``{"op": "first-polls", "names", "wait"}``: wait up to ``wait`` s for their first polls."""

    op: ClassVar[str] = "first-polls"
    names: tuple[str, ...] = ()
    wait: float = 0.0


@dataclass(frozen=True, slots=True)
class EvaluateNow:
    """``{"op": "evaluate-now", "names", "wait"}``: poll now (``names`` None: every running one)."""

    op: ClassVar[str] = "evaluate-now"
    names: tuple[str, ...] | None = None
    wait: float = 0.0


@dataclass(frozen=True, slots=True)
class ClearAutopause:
    """``{"op": "clear-autopause", "name"}``: clear a rate-limit auto-pause, then reconcile."""

    op: ClassVar[str] = "clear-autopause"
    name: str


Request = Status | Reconcile | FirstPolls | EvaluateNow | ClearAutopause


class BadRequest(ValueError):
    """A request the daemon cannot take; ``str(e)`` is the one-line ``error`` of the reply."""


def encode(request: Request) -> dict[str, Any]:
    """The wire object of ``request`` (JSON-ready; camelCase keys)."""
    match request:
        case Reconcile():
            return {"op": request.op, "wait": request.wait, "names": list(request.names),
                    "allowMassStop": request.allow_mass_stop}
        case FirstPolls():
            return {"op": request.op, "wait": request.wait, "names": list(request.names)}
        case EvaluateNow():
            names = None if request.names is None else list(request.names)
            return {"op": request.op, "wait": request.wait, "names": names}
        case ClearAutopause():
            return {"op": request.op, "name": request.name}
        case Status():
            return {"op": request.op}


def _seconds(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _wait(obj: Mapping[str, Any]) -> float:
    value = obj.get("wait")
    if value is None:
        return 0.0
    if not _seconds(value):
        raise BadRequest(WAIT_ERROR)
    if value > durations.MAX_SECONDS:
        raise BadRequest(WAIT_TOO_LONG)
    return float(value)


def _names(obj: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = obj.get("names")
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(n, str) for n in value)):
        raise BadRequest("names: expected a list of monitor names")
    return tuple(value)


def decode(obj: Mapping[str, Any]) -> Request:
    """Check and parse one wire request (a JSON object with an ``op`` string).

    Absent optional fields take their defaults; unknown fields are ignored.

    Raises:
        BadRequest: an argument of the wrong type (``WAIT_ERROR``, ``WAIT_TOO_LONG``,
            ``names: ...``, ``allowMassStop: ...``, ``name: ...``) or an unknown op.
    """
    op = obj.get("op")
    if op == "status":
        return Status()
    if op == "reconcile":
        wait, names = _wait(obj), _names(obj)
        allow = obj.get("allowMassStop", False)
        if not isinstance(allow, bool):
            raise BadRequest("allowMassStop: expected true or false")
        return Reconcile(wait=wait, names=names or (), allow_mass_stop=allow)
    if op == "first-polls":
        wait, names = _wait(obj), _names(obj)
        return FirstPolls(names=names or (), wait=wait)
    if op == "evaluate-now":
        wait, names = _wait(obj), _names(obj)
        return EvaluateNow(names=names, wait=wait)
    if op == "clear-autopause":
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise BadRequest("name: expected a monitor name")
        return ClearAutopause(name=name)
    raise BadRequest(f"unknown op {op!r} ({', '.join(OPS)})")


# -- replies ------------------------------------------------------------------------


class PollResult(TypedDict):
    """One monitor's poll: ``status`` ``ok``, ``failed`` or ``pending`` (not done yet)."""

    status: Literal["ok", "failed", "pending"]
    error: str | None


class Revision(TypedDict):
    """The git revision the daemon last planned from (``commit`` "" outside git)."""

    commit: str | None
    dirty: bool


class GitRevisions(TypedDict):
    """Git mode: the ref followed, the last commit it named (``lastAttemptedRevision``),
    the last commit applied (``lastAppliedRevision``) and why they differ or the last
    fetch failed (``error``, else null)."""

    ref: str
    lastAttemptedRevision: str | None
    lastAppliedRevision: str | None
    error: str | None


def git_status(doc: Mapping[str, Any]) -> GitRevisions:
    """``GitRevisions`` from ``daemon.gitmode.Revisions.to_json()`` or ``running.json``'s
    ``git`` object."""
    return {"ref": str(doc.get("ref", "")),
            "lastAttemptedRevision": doc.get("lastAttemptedRevision"),
            "lastAppliedRevision": doc.get("lastAppliedRevision"),
            "error": doc.get("error")}


class LastReconcile(TypedDict):
    """When (ISO 8601), why (``trigger``) and with what outcome the last reconcile ran."""

    at: str
    summary: str
    trigger: str


class StatusReply(TypedDict):
    """``status``: who runs here and what it runs (names sorted)."""

    ok: bool
    pid: int
    device: str
    root: str
    stateDir: str
    startedAt: str
    generation: int
    revision: Revision
    git: GitRevisions | None
    running: list[str]
    held: list[dict[str, str]]
    problems: list[str]
    writeErrors: dict[str, dict[str, Any]]
    settingsDigest: str
    lastReconcile: LastReconcile
    endpoints: NotRequired[dict[str, str]]
    streams: NotRequired[dict[str, dict[str, str | None]]]
    """What else the daemon serves: ``{"http": "http://127.0.0.1:8765"}`` (bound address)."""
    owners: NotRequired[dict[str, Any] | None]
    """Failover owners (``daemon.leases.Owners.snapshot``): etcd's reachability and, per
    ``owners:`` monitor, this device's role, the holder and the fencing token; None
    without ``[etcd]``."""


class AppliedReply(TypedDict):
    """What a reconcile did: names started, stopped, updated, failed (-> error), held."""

    started: list[str]
    stopped: list[str]
    updated: list[str]
    failed: dict[str, str]
    held: list[str]


class ReconcileReply(TypedDict):
    """``reconcile``: the plan (``Plan.to_json``), what was applied and the first polls."""

    ok: bool
    plan: dict[str, Any]
    generation: int
    applied: AppliedReply
    firstPolls: dict[str, PollResult]


class FirstPollsReply(TypedDict):
    """``first-polls``: name -> its first poll, for the named monitors that run."""

    ok: bool
    firstPolls: dict[str, PollResult]


class EvaluateNowReply(TypedDict):
    """``evaluate-now``: name -> the result of the poll run now."""

    ok: bool
    results: dict[str, PollResult]


class ClearAutopauseReply(TypedDict):
    """``clear-autopause``: whether an auto-pause was held, and the plan summary after it."""

    ok: bool
    cleared: bool
    summary: str


class ErrorReply(TypedDict):
    """Any request that failed: ``{"ok": false, "error": "one line"}``."""

    ok: bool
    error: str


Reply = (StatusReply | ReconcileReply | FirstPollsReply | EvaluateNowReply
         | ClearAutopauseReply | ErrorReply)


def error(message: str) -> ErrorReply:
    """The reply for a failed request."""
    return {"ok": False, "error": message}


def owner_role(status: Mapping[str, Any] | None, name: str) -> str:
    """An ``owners:`` monitor's role on this device from the daemon's ``status`` reply
    (``StatusReply.owners``), for list, view and plan:
    ``holder: a``, ``standby (holder: a)``, ``standby (etcd unreachable)``, or
    ``standby`` before the daemon first asked etcd, ``standby (no [etcd])`` without
    ``[etcd]``, ``-`` without a daemon."""
    if status and status.get("owners") is None:
        return "standby (no [etcd])"
    owners = (status or {}).get("owners") or {}
    seat = (owners.get("monitors") or {}).get(name)
    if seat is None:
        return "standby" if status else "-"
    if seat.get("role") == "unreachable":
        return "standby (etcd unreachable)"
    holder = seat.get("holder") or "none"
    return f"holder: {holder}" if seat.get("role") == "holder" else f"standby (holder: {holder})"
