"""The control server: serves ``daemon.protocol`` on ``<state>/control.sock`` (mode 0600).

One request per connection: a line of JSON is read, checked and parsed by
``protocol.decode`` (a bad one answers ``{"ok": false, "error": "one line"}`` and
never reaches the daemon), answered by the handler (the daemon's control
operations, ``daemon.operations``), and the typed reply is written back as one line.
An exception in the handler is one ``error`` reply and a logged traceback: one bad
request never takes the daemon down.

Only the owner of the state directory can connect (0600, the socket's
directory is the state directory). Unix socket paths are limited to about 107
bytes; when ``<state>/control.sock`` is longer, the socket lives in a private
temporary directory and ``control.sock`` is a symlink to it (clients connect to
the link's target, ``protocol.connect_path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from reconciler.daemon import protocol

log = logging.getLogger("monitors.daemon")

MAX_SUN_PATH = 100
MAX_REQUEST = 1 << 20

Handler = Callable[[protocol.Request], Awaitable[protocol.Reply]]
"""Answers one parsed request (the daemon's ``operations.Operations.answer``)."""


class ControlServer:
    """Serves the control API on the event loop; ``handler`` answers one parsed request.

    Args:
        settings_digest: ``protocol.settings_digest`` of the daemon's settings, added to
            a ``status`` reply that lacks ``settingsDigest``.
    """

    def __init__(self, state_dir: Path, handler: Handler, *,
                 settings_digest: str | None = None) -> None:
        self.state_dir = state_dir
        self.handler = handler
        self.settings_digest = settings_digest
        self._server: asyncio.AbstractServer | None = None
        self._private_dir: str | None = None
        self._bound: str | None = None

    async def start(self) -> None:
        """Bind and listen (removes a stale socket left by a killed daemon; the caller
        holds the state lock, so no live daemon owns it).

        Raises:
            OSError: the socket cannot be created.
        """
        link = protocol.socket_path(self.state_dir)
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
            target = os.path.join(self._private_dir, protocol.SOCKET_NAME)
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
                reply: protocol.Reply = protocol.error(f"bad request: {e}")
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

    async def _answer(self, obj: dict[str, Any]) -> protocol.Reply:
        try:
            request = protocol.decode(obj)
        except protocol.BadRequest as e:
            return protocol.error(str(e))
        try:
            reply = await self.handler(request)
        except Exception as e:  # one bad request never takes the daemon down
            log.exception("control request %r failed", request.op)
            return protocol.error(f"{type(e).__name__}: {e}")
        if isinstance(request, protocol.Status) and reply.get("ok") and self.settings_digest:
            cast(dict[str, Any], reply).setdefault("settingsDigest", self.settings_digest)
        return reply

    async def close(self) -> None:
        """Stop listening and remove the socket (and the private directory)."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(OSError):
            protocol.socket_path(self.state_dir).unlink()
        if self._bound:
            with contextlib.suppress(OSError):
                os.unlink(self._bound)
        if self._private_dir:
            shutil.rmtree(self._private_dir, ignore_errors=True)
