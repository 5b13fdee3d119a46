"""SIGHUP: re-read ``monitors.toml`` (and the fleet file) without a restart.

``read`` loads and checks the new settings completely before anything changes,
so an invalid file leaves the running daemon exactly as it was (the caller logs
the one-line error). What a running daemon cannot change in place is kept and
named: the device, the state directory (the lock is on it), the repository root,
``[http]`` and ``[etcd]`` (their server and lease are made at start).
Everything else takes effect: agents, routines, channels, owner, layer
directories, the fleet, ``[daemon] resync`` (unless ``--resync`` was given).

Peers: nginx, sshd and Prometheus re-read their configuration on SIGHUP and keep
running the old one when the new one is invalid.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler import errors, fleet, settings

if TYPE_CHECKING:
    from reconciler.daemon.main import Daemon

log = logging.getLogger("monitors.daemon")


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
    from reconciler.daemon.options import resync_seconds

    new = settings.load(root=cfg.root, state_dir=cfg.state_dir, device=cfg.device)
    checks.require_valid(new)  # the schema, and agents/routines only from a trusted file
    actions = options.parse(new.toml)
    devices = fleet.load(new.fleet_file)
    resync = resync_seconds(new)
    kept: list[str] = []
    device = new.toml.get("device")
    if isinstance(device, str) and device and device != cfg.device:
        kept.append(f"device {device!r} (this daemon runs as {cfg.device!r})")
    state_dir = new.toml.get("stateDir")
    if state_dir and (cfg.root / str(state_dir)).resolve() != cfg.state_dir.resolve():
        kept.append(f"stateDir {state_dir!r} (this daemon uses {cfg.state_dir})")
    if new.toml.get("http") != cfg.toml.get("http"):
        kept.append("[http] (the HTTP server keeps its listen address, TLS and token)")
    if new.toml.get("etcd") != cfg.toml.get("etcd"):
        kept.append("[etcd] (owners keep the etcd client and lease they started with)")
    return Reloaded(cfg=new, actions=actions, fleet=devices, resync=resync, kept=tuple(kept))


def describe_error(e: errors.MonitorsError) -> str:
    """The log line for a reload refused by an invalid file."""
    return (f"SIGHUP: {e}; keeping the settings in use (fix {settings.SETTINGS_FILE} and "
            "send SIGHUP again)")


async def apply(daemon: Daemon) -> None:
    """Re-read monitors.toml and the fleet file (``read``, in a worker thread) and give
    them to ``daemon``'s reconciler, dispatcher and sources; an invalid file keeps the
    settings in use. One log line either way. ``[daemon] resync`` changes
    ``daemon.options`` unless ``--resync`` fixed it."""
    from reconciler.daemon import protocol

    try:
        new = await asyncio.to_thread(read, daemon.cfg)
    except errors.MonitorsError as e:
        log.error("%s", describe_error(e))
        return
    before = protocol.settings_digest(daemon.cfg)
    daemon.reconciler.cfg = new.cfg
    try:
        daemon.reconciler.follow()
    except errors.MonitorsError as e:
        log.error("SIGHUP: %s; keeping the [git] settings in use", e)
    if daemon.parts is not None:
        daemon.parts.dispatcher.reconfigure(new.actions)
        daemon.parts.ctx.settings, daemon.parts.ctx.fleet = new.cfg, new.fleet
    if not daemon.options.resync_fixed:
        daemon.options = dataclasses.replace(daemon.options, resync=new.resync)
    after = protocol.settings_digest(new.cfg)
    what = "unchanged" if after == before else f"changed ({after[:19]}...)"
    kept = f"; needs a restart, not applied: {'; '.join(new.kept)}" if new.kept else ""
    log.info("SIGHUP: re-read %s: %s; reconciling%s", settings.SETTINGS_FILE, what, kept)
