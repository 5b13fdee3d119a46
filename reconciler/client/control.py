"""The CLI side of the control API (``daemon.protocol``): requests, and starting the daemon.

Blocking sockets only (the CLI has no event loop). ``request`` sends one typed
request (``protocol.Request``) and returns the reply; ``status``, ``reconcile``,
``first_polls``, ``evaluate_now`` and ``clear_autopause`` give typed replies. They
raise ``errors.PlanError`` with what to do next when no daemon answers.
``state_errors`` (``state.direrrors``) turns an ``OSError`` on a path in the state
directory (read-only, not a directory, full) into one ``errors.StateError`` line.

The daemon reads monitors.toml at start and on SIGHUP (``daemon.reload``).
``settings_mismatch`` compares the settings of this command with
those of the running daemon (its ``status``: ``device``, ``root`` and
``settingsDigest``, the ``protocol.settings_digest`` of the monitors.toml it runs with), so
``plan``, ``apply`` and ``list`` never plan or report for settings the daemon
does not run with.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from reconciler import atomic, errors, settings
from reconciler.daemon import protocol, startreport
from reconciler.state import direrrors, lock

LOG_FILE = "daemon.log"
START_TIMEOUT = 15.0


class NotRunning(errors.PlanError):
    """No daemon answers on the state directory's control socket."""


def request(state_dir: Path, req: protocol.Request, *, timeout: float = 10.0
            ) -> dict[str, Any]:
    """Send one request and return the daemon's reply object (an ``ok`` one).

    Args:
        timeout: seconds for connect + reply (add any ``wait`` the request asks for).

    Raises:
        NotRunning: no daemon listens (no socket, or connection refused).
        errors.PlanError: the daemon answered ``ok: false`` or with garbage, or timed out.
    """
    op = req.op
    path = protocol.connect_path(state_dir)
    body = json.dumps(protocol.encode(req)).encode() + b"\n"
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


def status(state_dir: Path, *, timeout: float = 5.0) -> protocol.StatusReply | None:
    """The daemon's ``status`` reply, or None when no daemon is running here."""
    if not lock.is_locked(state_dir):
        return None
    try:
        return cast(protocol.StatusReply, request(state_dir, protocol.Status(), timeout=timeout))
    except NotRunning:
        return None


def reconcile(state_dir: Path, req: protocol.Reconcile, *, timeout: float
              ) -> protocol.ReconcileReply:
    """Hand a reconcile to the daemon; its ``reconcile`` reply (``request``'s errors)."""
    return cast(protocol.ReconcileReply, request(state_dir, req, timeout=timeout))


def first_polls(state_dir: Path, req: protocol.FirstPolls, *, timeout: float
                ) -> protocol.FirstPollsReply:
    """Ask for first polls; the daemon's ``first-polls`` reply (``request``'s errors)."""
    return cast(protocol.FirstPollsReply, request(state_dir, req, timeout=timeout))


def evaluate_now(state_dir: Path, req: protocol.EvaluateNow, *, timeout: float = 10.0
                 ) -> protocol.EvaluateNowReply:
    """Poll running monitors now; the daemon's ``evaluate-now`` reply (``request``'s errors)."""
    return cast(protocol.EvaluateNowReply, request(state_dir, req, timeout=timeout))


def clear_autopause(state_dir: Path, name: str, *, timeout: float = 10.0
                    ) -> protocol.ClearAutopauseReply:
    """Clear ``name``'s auto-pause in the daemon; its reply (``request``'s errors)."""
    return cast(protocol.ClearAutopauseReply,
                request(state_dir, protocol.ClearAutopause(name=name), timeout=timeout))


def settings_mismatch(cfg: settings.Settings, status: Mapping[str, Any] | None) -> str | None:
    """Why the running daemon (its ``status`` reply) runs with settings other than ``cfg``,
    or None when they agree or no daemon runs (``status`` None).

    Compares the device, the repository root and, when the daemon reports one,
    ``settingsDigest`` against ``protocol.settings_digest(cfg)``. The answer is one line:
    ``the daemon runs with other settings (device vm; monitors.toml changed since it
    started): restart it (`monitors stop`, then `monitors apply`) to use them (daemon pid 12)``.
    """
    if status is None:
        return None
    what: list[str] = []
    device = status.get("device")
    if isinstance(device, str) and device != cfg.device:
        what.append(f"device {device}")
    root = status.get("root")
    if isinstance(root, str) and root and os.path.realpath(root) != os.path.realpath(cfg.root):
        what.append(f"root {root}")
    digest = status.get("settingsDigest")
    if isinstance(digest, str) and digest != protocol.settings_digest(cfg):
        what.append(f"{settings.SETTINGS_FILE} changed since it started")
    if not what:
        return None
    pid = status.get("pid")
    which = f" (daemon pid {pid})" if isinstance(pid, int) else ""
    return (f"the daemon runs with other settings ({'; '.join(what)}): restart it "
            f"(`monitors stop`, then `monitors apply`) to use them{which}")


class SettingsMismatch(errors.PlanError):
    """The running daemon runs with other settings than this command (``settings_mismatch``)."""


def check_settings(cfg: settings.Settings, status: Mapping[str, Any] | None) -> None:
    """Raise ``SettingsMismatch`` when ``settings_mismatch(cfg, status)`` finds a difference.

    Raises:
        SettingsMismatch: with the one-line reason.
    """
    reason = settings_mismatch(cfg, status)
    if reason is not None:
        raise SettingsMismatch(reason)


def start_detached(cfg: settings.Settings, *, timeout: float = START_TIMEOUT) -> int:
    """Start ``monitors run`` in the background, logging to ``<state>/daemon.log``.

    Returns once the daemon answers ``status`` (its first reconcile is done).

    Returns:
        the daemon's pid.

    Raises:
        errors.PlanError: it exited early (with its one-line start error, else the last
            lines of its log) or did not answer within ``timeout`` seconds, or could not
            be spawned.
        errors.StateError: the state directory or its log cannot be written.

    The daemon's start error reaches the ``PlanError`` through ``daemon.startreport``,
    so a full disk (where the log cannot take it either) cannot swallow it.
    """
    log_path = cfg.state_dir / LOG_FILE
    argv = [sys.executable, "-m", "reconciler", "--root", str(cfg.root), "--state-dir",
            str(cfg.state_dir), "--device", cfg.device, "run"]
    try:
        atomic.make_dirs(cfg.state_dir)
        log_file = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                                     | os.O_CLOEXEC, atomic.FILE_MODE), "ab")
    except OSError as e:
        raise direrrors.state_error(cfg.state_dir, e, doing="write the daemon log") from e
    report_fd, child_fd = startreport.pipe()
    try:
        with log_file:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        close_fds=True, pass_fds=(child_fd,),
                                        cwd=str(cfg.root),
                                        env={**os.environ, "MONITORS_LOG_TIMESTAMPS": "1",
                                             startreport.ENV: str(child_fd)})
            except OSError as e:
                raise errors.PlanError(f"cannot start the daemon ({argv[0]}): "
                                       f"{e.strerror or e}") from e
    except BaseException:
        os.close(report_fd)
        raise
    finally:
        os.close(child_fd)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            rc = proc.poll()
            if rc is not None:
                if rc == errors.ExitCode.CHANGES and lock.is_locked(cfg.state_dir):
                    # exit 2: another daemon (a concurrent apply's) won the race for the
                    # lock: wait for it to answer, then hand the change to it
                    while time.monotonic() < deadline:
                        if status(cfg.state_dir, timeout=2.0) is not None:
                            return lock.holder_pid(cfg.state_dir) or 0
                        time.sleep(0.05)
                    break
                reason = startreport.read(report_fd)
                report_fd = -1
                if reason:  # the daemon's own line: it reaches us even on a full disk
                    raise errors.PlanError(f"the daemon could not start (exit {rc}): "
                                           f"{reason}")
                tail = _tail(log_path)
                raise errors.PlanError(f"the daemon exited at start (exit {rc}); last lines "
                                       f"of {log_path}:\n{tail}")
            if status(cfg.state_dir, timeout=2.0) is not None:
                return proc.pid
            time.sleep(0.05)
    finally:
        if report_fd >= 0:
            os.close(report_fd)
    raise errors.PlanError(f"the daemon did not answer within {timeout:g}s; see {log_path}")


def _tail(path: Path, lines: int = 10) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
