"""The CLI side of the control API (``daemon.control``): requests, and starting the daemon.

Blocking sockets only (the CLI has no event loop). ``request`` raises
``errors.PlanError`` with what to do next when no daemon answers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from reconciler import errors, settings
from reconciler.state import lock

LOG_FILE = "daemon.log"
SOCKET_NAME = "control.sock"
START_TIMEOUT = 15.0


def socket_path(state_dir: Path) -> Path:
    """``<state>/control.sock`` (may be a symlink to a private socket; see ``daemon.control``)."""
    return state_dir / SOCKET_NAME


def connect_path(state_dir: Path) -> str:
    """The path a client connects to (the symlink's target for long state paths)."""
    path = socket_path(state_dir)
    if path.is_symlink():
        return os.readlink(path)
    return str(path)


class NotRunning(errors.PlanError):
    """No daemon answers on the state directory's control socket."""


def request(state_dir: Path, op: str, *, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
    """Send one request and return the daemon's reply object.

    Args:
        timeout: seconds for connect + reply (add any ``wait`` the request asks for).

    Raises:
        NotRunning: no daemon listens (no socket, or connection refused).
        errors.PlanError: the daemon answered ``ok: false`` or with garbage, or timed out.
    """
    path = connect_path(state_dir)
    body = json.dumps({"op": op, **args}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as e:
            raise NotRunning(f"no daemon is running on {state_dir} (start it with "
                             "`monitors run` or `monitors apply`)") from e
        except OSError as e:
            raise NotRunning(f"cannot reach the daemon on {path}: {e.strerror}") from e
        try:
            sock.sendall(body)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        except TimeoutError as e:
            raise errors.PlanError(f"the daemon did not answer {op!r} within {timeout:g}s") from e
        except OSError as e:
            raise errors.PlanError(f"control socket {path}: {e.strerror or e}") from e
    try:
        reply = json.loads(b"".join(chunks).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.PlanError(f"the daemon sent an unreadable reply to {op!r}") from e
    if not isinstance(reply, dict):
        raise errors.PlanError(f"the daemon sent an unreadable reply to {op!r}")
    if not reply.get("ok"):
        raise errors.PlanError(f"daemon: {reply.get('error', 'request failed')}")
    return reply


def status(state_dir: Path, *, timeout: float = 5.0) -> dict[str, Any] | None:
    """The daemon's ``status`` reply, or None when no daemon is running here."""
    if not lock.is_locked(state_dir):
        return None
    try:
        return request(state_dir, "status", timeout=timeout)
    except NotRunning:
        return None


def start_detached(cfg: settings.Settings, *, timeout: float = START_TIMEOUT) -> int:
    """Start ``monitors run`` in the background, logging to ``<state>/daemon.log``.

    Returns once the daemon answers ``status`` (its first reconcile is done).

    Returns:
        the daemon's pid.

    Raises:
        errors.PlanError: it exited early (with the last lines of its log) or did not
            answer within ``timeout`` seconds.
    """
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    log_path = cfg.state_dir / LOG_FILE
    argv = [sys.executable, "-m", "reconciler", "--root", str(cfg.root), "--state-dir",
            str(cfg.state_dir), "--device", cfg.device, "run"]
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True, cwd=str(cfg.root),
                                env={**os.environ, "MONITORS_LOG_TIMESTAMPS": "1"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rc = proc.poll()
        if rc is not None:
            tail = _tail(log_path)
            # exit 2: another daemon won the race: use it
            if rc == errors.ExitCode.CHANGES and status(cfg.state_dir) is not None:
                return lock.holder_pid(cfg.state_dir) or 0
            raise errors.PlanError(f"the daemon exited at start (exit {rc}); last lines of "
                                   f"{log_path}:\n{tail}")
        if status(cfg.state_dir, timeout=2.0) is not None:
            return proc.pid
        time.sleep(0.05)
    raise errors.PlanError(f"the daemon did not answer within {timeout:g}s; see {log_path}")


def _tail(path: Path, lines: int = 10) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
