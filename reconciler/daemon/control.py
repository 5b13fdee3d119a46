"""The control API: a local unix socket ``<state>/control.sock`` (mode 0600) speaking JSON.

Protocol (one request per connection; UTF-8 JSON, one object per line)::

    client -> {"op": "status"}\\n
    daemon -> {"ok": true, ...}\\n            (or {"ok": false, "error": "one line"})

Operations:

``status``
    ``{"ok", "pid", "device", "root", "stateDir", "startedAt", "generation",
    "revision": {"commit", "dirty"}, "running": [names], "held": [...],
    "problems": [lines], "lastReconcile": {"at", "summary", "trigger"},
    "settingsDigest"}``; ``settingsDigest`` is ``client.settings_digest`` of the
    monitors.toml the daemon loaded at start (``client.settings_mismatch``).
``reconcile`` ``{"allowMassStop": bool, "wait": seconds, "names": [names]}``
    Reconcile now (load the layers, plan, apply), then wait up to ``wait`` seconds
    for the first poll of every started or replaced evaluator and of ``names``.
    Answers ``{"ok", "plan": <plan JSON>, "applied": {"started", "stopped", "updated",
    "failed"}, "firstPolls": {name: {"status": "ok"|"failed"|"pending", "error"}},
    "generation"}``.
``first-polls`` ``{"names": [names], "wait": seconds}``
    Wait up to ``wait`` seconds for the first poll of the named running monitors
    (``apply`` asks again and again, to show which are still pending):
    ``{"ok", "firstPolls": {name: {"status", "error"}}}``, naming only monitors that
    run (a name left out is not running on this device).
``evaluate-now`` ``{"names": [names] | null, "wait": seconds}``
    Poll the named running monitors (all when null) once, now, out of schedule:
    ``{"ok", "results": {name: {"status", "error"}}}``.
``clear-autopause`` ``{"name": name}``
    Clear a rate-limit auto-pause in running state (``monitors resume``), then reconcile.

Arguments are checked before the daemon sees a request (``request_problem``): a
wrong type answers ``{"ok": false, "error": "wait: expected a number of seconds"}``;
``wait`` is at most ``durations.MAX_SECONDS``.

Only the owner of the state directory can connect (0600, the socket's
directory is the state directory). Unix socket paths are limited to about 107
bytes; when ``<state>/control.sock`` is longer, the socket lives in a private
temporary directory and ``control.sock`` is a symlink to it (clients connect to
the link's target).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from reconciler import durations, settings
from reconciler.client.control import SOCKET_NAME, connect_path, settings_digest, socket_path

__all__ = ["SOCKET_NAME", "ControlServer", "connect_path", "request_problem", "socket_path"]

log = logging.getLogger("monitors.daemon")

MAX_SUN_PATH = 100
MAX_REQUEST = 1 << 20

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

WAIT_ERROR = "wait: expected a number of seconds"
WAIT_TOO_LONG = f"wait: at most {int(durations.MAX_SECONDS)} seconds (3650d)"


def _seconds(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _names(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(n, str) for n in value))


def request_problem(request: dict[str, Any]) -> str | None:
    """What is wrong with the arguments of a control request, or None.

    Checks the fields the operations of the module docstring take: ``wait`` a
    finite number of seconds, 0 or more (``WAIT_ERROR``); ``names`` null or a list
    of strings; ``allowMassStop`` a boolean; ``clear-autopause``'s ``name`` a
    non-empty string. Absent optional fields are fine; unknown ops are left to
    the handler.
    """
    op = request.get("op")
    if op in ("reconcile", "evaluate-now", "first-polls"):
        if "wait" in request and request["wait"] is not None and not _seconds(request["wait"]):
            return WAIT_ERROR
        if _seconds(request.get("wait")) and request["wait"] > durations.MAX_SECONDS:
            return WAIT_TOO_LONG
        if not _names(request.get("names")):
            return "names: expected a list of monitor names"
    if op == "reconcile" and not isinstance(request.get("allowMassStop", False), bool):
        return "allowMassStop: expected true or false"
    if op == "clear-autopause":
        name = request.get("name")
        if not isinstance(name, str) or not name:
            return "name: expected a monitor name"
    return None


def _daemon_settings_digest(handler: Handler) -> str | None:
    """The ``settings_digest`` of the settings the handler's daemon runs with (its ``cfg``)."""
    cfg = getattr(getattr(handler, "__self__", None), "cfg", None)
    return settings_digest(cfg) if isinstance(cfg, settings.Settings) else None


class ControlServer:
    """Serves the control API on the event loop; ``handler`` answers one request dict.

    Args:
        settings_digest: ``client.settings_digest`` of the daemon's settings, added to
            every ``status`` reply as ``settingsDigest``; default: taken from the
            handler's daemon (a bound method of an object with a ``cfg``).
    """

    def __init__(self, state_dir: Path, handler: Handler, *,
                 settings_digest: str | None = None) -> None:
        self.state_dir = state_dir
        self.handler = handler
        self.settings_digest = settings_digest or _daemon_settings_digest(handler)
        self._server: asyncio.AbstractServer | None = None
        self._private_dir: str | None = None
        self._bound: str | None = None

    async def start(self) -> None:
        """Bind and listen (removes a stale socket left by a killed daemon; the caller
        holds the state lock, so no live daemon owns it).

        Raises:
            OSError: the socket cannot be created.
        """
        link = socket_path(self.state_dir)
        with contextlib.suppress(FileNotFoundError):
            if link.is_symlink():
                stale = os.readlink(link)
                link.unlink()
                shutil.rmtree(os.path.dirname(stale), ignore_errors=True)
            else:
                link.unlink()
        target = str(link)
        if len(target) > MAX_SUN_PATH:
            self._private_dir = tempfile.mkdtemp(prefix="monitors-ctl-")
            target = os.path.join(self._private_dir, SOCKET_NAME)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=target,
                                                           limit=MAX_REQUEST)
        finally:
            os.umask(old_umask)
        os.chmod(target, 0o600)
        if self._private_dir is not None:
            os.symlink(target, link)
        self._bound = target

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                request = json.loads(line.decode("utf-8"))
                if not isinstance(request, dict) or not isinstance(request.get("op"), str):
                    raise ValueError("expected a JSON object with an 'op' string")
            except (ValueError, UnicodeDecodeError) as e:
                reply: dict[str, Any] = {"ok": False, "error": f"bad request: {e}"}
            else:
                reply = await self._answer(request)
            writer.write(json.dumps(reply, default=str).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        problem = request_problem(request)
        if problem is not None:
            return {"ok": False, "error": problem}
        try:
            reply = await self.handler(request)
        except Exception as e:  # one bad request never takes the daemon down
            log.exception("control request %r failed", request.get("op"))
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
        if request.get("op") == "status" and reply.get("ok") and self.settings_digest:
            reply.setdefault("settingsDigest", self.settings_digest)
        return reply

    async def close(self) -> None:
        """Stop listening and remove the socket (and the private directory)."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(OSError):
            socket_path(self.state_dir).unlink()
        if self._bound:
            with contextlib.suppress(OSError):
                os.unlink(self._bound)
        if self._private_dir:
            shutil.rmtree(self._private_dir, ignore_errors=True)
