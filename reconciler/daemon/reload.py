"""SIGHUP: re-read ``monitors.toml`` (and the fleet file) without a restart.

``read`` loads and checks the new settings completely before anything changes,
so an invalid file leaves the running daemon exactly as it was (the caller logs
the one-line error). What a running daemon cannot change in place is kept and
named: the device, the state directory (the lock is on it) and the repository root.
Everything else takes effect: agents, routines, channels, owner, layer
directories, the fleet, ``[daemon] resync`` (unless ``--resync`` was given).

Peers: nginx, sshd and Prometheus re-read their configuration on SIGHUP and keep
running the old one when the new one is invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reconciler import errors, fleet, settings


@dataclass(frozen=True, slots=True)
class Reloaded:
    """New settings, checked.

    Attributes:
        cfg: the new settings (same root, state directory and device as before).
        actions: ``actions.options.parse(cfg.toml)``.
        fleet: the fleet file's devices.
        resync: ``[daemon] resync`` in seconds.
        kept: one line per setting that changed but needs a restart (empty when none).
    """

    cfg: settings.Settings
    actions: Any
    fleet: fleet.Fleet
    resync: float
    kept: tuple[str, ...]


def read(cfg: settings.Settings) -> Reloaded:
    """Read ``monitors.toml`` and the fleet file again for the daemon running with ``cfg``.

    Raises:
        errors.ConfigError: the new monitors.toml or fleet file is invalid (one line,
            naming the file and position), or monitors.toml defines agents or routines
            and another user could have written it (``config.trust``); nothing was
            changed.
    """
    from reconciler.actions import checks, options
    from reconciler.daemon import main

    new = settings.load(root=cfg.root, state_dir=cfg.state_dir, device=cfg.device)
    checks.require_valid(new)  # the schema, and agents/routines only from a trusted file
    actions = options.parse(new.toml)
    devices = fleet.load(new.fleet_file)
    resync = main.resync_seconds(new)
    kept: list[str] = []
    device = new.toml.get("device")
    if isinstance(device, str) and device and device != cfg.device:
        kept.append(f"device {device!r} (this daemon runs as {cfg.device!r})")
    state_dir = new.toml.get("stateDir")
    if state_dir and (cfg.root / str(state_dir)).resolve() != cfg.state_dir.resolve():
        kept.append(f"stateDir {state_dir!r} (this daemon uses {cfg.state_dir})")
    if new.toml.get("http") != cfg.toml.get("http"):
        kept.append("[http] (the HTTP server keeps its listen address, TLS and token)")
    return Reloaded(cfg=new, actions=actions, fleet=devices, resync=resync, kept=tuple(kept))


def describe_error(e: errors.MonitorsError) -> str:
    """The log line for a reload refused by an invalid file."""
    return (f"SIGHUP: {e}; keeping the settings in use (fix {settings.SETTINGS_FILE} and "
            "send SIGHUP again)")
