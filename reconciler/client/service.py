"""The systemd unit that runs the daemon (``monitors service install [--user]``).

``unit_text`` renders ``monitors.service``: ``Type=notify`` (the daemon sends
READY, RELOADING, STOPPING and WATCHDOG: ``daemon.sdnotify``), ``WatchdogSec``,
``Restart=on-failure``, ``ExecReload`` sending SIGHUP (re-read monitors.toml,
reconcile), logs on stderr for journald as JSON lines (``--log-format json``),
secrets such as ``MONITORS_TOKEN`` from an optional ``EnvironmentFile``. A user
unit goes to ``~/.config/systemd/user/`` (``WantedBy=default.target``), a system
unit to ``/etc/systemd/system/`` running as the installing user
(``WantedBy=multi-user.target``). ``contrib/monitors.service`` is the same unit
for a checkout in ``/srv/monitors``. Reference: systemd.service(5), systemd.exec(5).
"""

from __future__ import annotations

import getpass
import os
import shlex
import sys
from pathlib import Path

from reconciler import settings

UNIT_NAME = "monitors.service"
WATCHDOG = "30s"


def unit_path(*, user: bool, name: str = UNIT_NAME) -> Path:
    """Where ``install`` writes the unit: the user's or the system's unit directory."""
    if user:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return base / "systemd" / "user" / name
    return Path("/etc/systemd/system") / name


def unit_text(cfg: settings.Settings, *, user: bool, python: str | None = None,
              run_as: str | None = None) -> str:
    """The unit for the daemon of ``cfg`` (its root, state directory and device).

    Args:
        python: the interpreter running ``-m reconciler`` (default: this one).
        run_as: ``User=`` of a system unit (default: the installing user).
    """
    exe = python or sys.executable
    argv = [exe, "-m", "reconciler", "--root", str(cfg.root), "--state-dir",
            str(cfg.state_dir), "--device", cfg.device, "run", "--log-format", "json"]
    env_file = ("%h/.config/monitors/env" if user else "/etc/monitors/env")
    lines = [
        "[Unit]",
        # specifiers are expanded in Description= too (variables are not)
        "Description=" + f"monitors reconciler daemon ({cfg.device}: {cfg.root})".replace(
            "%", "%%"),
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=notify",
        "NotifyAccess=main",
        f"ExecStart={_escape(shlex.join(argv))}",
        "ExecReload=/bin/kill -HUP $MAINPID",
        f"WorkingDirectory={_escape(str(cfg.root))}",
        f"EnvironmentFile=-{env_file}",
        "Environment=PYTHONUNBUFFERED=1",
        "Restart=on-failure",
        "RestartSec=5s",
        f"WatchdogSec={WATCHDOG}",
        "TimeoutStopSec=30s",
        "KillMode=mixed",
    ]
    if not user:
        lines.append(f"User={run_as or getpass.getuser()}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if user else 'multi-user.target'}",
              ""]
    return "\n".join(lines)


def _escape(value: str) -> str:
    """``%`` and ``$`` as systemd reads them literally (specifiers, variables)."""
    return value.replace("%", "%%").replace("$", "$$")


def install(path: Path, text: str) -> None:
    """Write the unit at ``path`` (0644, atomically; parent directories created).

    Raises:
        OSError: it cannot be written (e.g. ``/etc/systemd/system`` without root).
    """
    from reconciler import atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, text.encode(), durable=True, mode=0o644)
