"""Plan against the live daemon, and hand a change over to it (``monitors plan``/``apply``).

``current_plan`` reads the layers and the running registry: with a daemon
running, ``running.json`` (published after each of its reconciles) is the
running state; without one, running state is empty and the applied set in
``running.json`` only supplies last-known-good versions. ``apply`` checks a
saved plan, the mass-stop guard, starts the daemon when needed, asks it to
reconcile and waits for first polls. No printing, no click: results are data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import errors, settings
from reconciler.daemon import client, snapshot
from reconciler.model import MonitorName
from reconciler.planning import plan as plan_mod
from reconciler.planning.diff import Action
from reconciler.state import registry as registry_mod

REQUEST_SLACK = 30.0


def _autopaused(state_dir: Path) -> dict[MonitorName, str]:
    from reconciler.state import store as store_mod

    store = store_mod.Store(state_dir)
    out: dict[MonitorName, str] = {}
    for name in store.names():
        record = store.autopause(name)
        if record:
            out[MonitorName(name)] = (f"{record.get('reason', 'rate limit')} (since "
                                      f"{record.get('at', '?')}; `monitors resume` clears it)")
    return out


def current_plan(cfg: settings.Settings, *, allow_mass_stop: bool = False) -> plan_mod.Plan:
    """The plan a reconcile would carry out now on this device.

    Raises:
        errors.StateError: ``running.json`` is from a newer version, or the state
            directory cannot be read.
        errors.ConfigError: the fleet file or settings are unusable.
    """
    with client.state_errors(cfg.state_dir):
        status = client.status(cfg.state_dir)
        reg = registry_mod.load(cfg.state_dir)
        last_good = {n: e.monitor for n, e in reg.entries.items()}
        autopaused = _autopaused(cfg.state_dir)
    snap = snapshot.read(cfg, last_good=last_good, autopaused=autopaused)
    running = last_good if status is not None else {}
    generation = int(status["generation"]) if status is not None else reg.generation
    return plan_mod.make(
        snap.desired, running, device=cfg.device, daemon_running=status is not None,
        daemon_pid=status.get("pid") if status else None, generation=generation,
        digest=snap.digest, commit=snap.commit, dirty=snap.dirty, problems=snap.problems,
        allow_mass_stop=allow_mass_stop, created_at=snapshot.now_iso(), root=cfg.root,
        error_files=snap.error_files)


def load_saved(path: Path) -> plan_mod.SavedPlan:
    """Read a ``plan --out`` file.

    Raises:
        errors.PlanError: unreadable, not JSON or not a plan file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return plan_mod.SavedPlan.from_json(doc)
    except OSError as e:
        raise errors.PlanError(f"{path}: cannot read plan file: {e.strerror}") from e
    except ValueError as e:
        raise errors.PlanError(f"{path}: {e}") from e


@dataclass(slots=True)
class MonitorReport:
    """What apply did to one monitor: ``status`` is ``ok`` (first poll ok), ``failed``,
    ``pending`` (not picked up in time), ``stopped``, ``updated``, ``held`` or ``error``."""

    name: str
    action: str
    status: str
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        """``{"name", "action", "status", "detail"}``."""
        return {"name": self.name, "action": self.action, "status": self.status,
                "detail": self.detail}


@dataclass(slots=True)
class ApplyReport:
    """The outcome of ``apply``."""

    plan: plan_mod.Plan
    started_daemon: int | None = None
    monitors: list[MonitorReport] = field(default_factory=list)
    generation: int | None = None
    declined: bool = False

    @property
    def ok(self) -> bool:
        """No failed, pending or errored monitor."""
        return all(m.status in ("ok", "stopped", "updated", "renamed") for m in self.monitors)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (``apply --json``)."""
        return {"plan": self.plan.to_json(), "startedDaemon": self.started_daemon,
                "generation": self.generation, "declined": self.declined, "ok": self.ok,
                "monitors": [m.to_json() for m in self.monitors]}


def apply(
    cfg: settings.Settings,
    *,
    plan_file: Path | None = None,
    wait: float = 30.0,
    allow_mass_stop: bool = False,
    confirm: Callable[[plan_mod.Plan], bool] | None = None,
) -> ApplyReport:
    """Apply the current plan (or a saved one that still matches) through the daemon.

    Args:
        plan_file: a ``monitors plan --out`` file; refused when stale.
        wait: seconds to wait for the first poll of each started or replaced monitor.
        confirm: asked with the plan before anything changes; False declines.

    Raises:
        errors.PlanError: stale saved plan (with what changed), mass-stop guard,
            the daemon could not be started or reached.
        errors.StateError: the state directory is unusable (read-only, not a directory).
    """
    plan = current_plan(cfg, allow_mass_stop=allow_mass_stop)
    if plan_file is not None:
        saved = load_saved(plan_file)
        stale = plan_mod.stale_reasons(saved, plan)
        if stale:
            raise errors.PlanError(f"{plan_file}: saved plan is stale: " + "; ".join(stale) +
                                   " (run `monitors plan --out` again)")
    if plan.mass_stop:
        raise errors.PlanError(f"refused by the mass-stop guard: {plan.mass_stop}")
    report = ApplyReport(plan)
    if not plan.has_changes and plan.daemon_running:
        return report
    if confirm is not None and plan.has_changes and not confirm(plan):
        report.declined = True
        return report
    if not plan.daemon_running:
        with client.state_errors(cfg.state_dir):
            report.started_daemon = client.start_detached(cfg)
    waited = [c.name for c in plan.changes
              if c.action in (Action.START, Action.REPLACE, Action.RENAME)]
    reply = client.request(cfg.state_dir, "reconcile", timeout=wait + REQUEST_SLACK,
                           wait=wait, names=waited, allowMassStop=allow_mass_stop)
    report.generation = reply.get("generation")
    polls: dict[str, dict[str, Any]] = reply.get("firstPolls") or {}
    applied = reply.get("applied") or {}
    failed: dict[str, str] = applied.get("failed") or {}
    for change in plan.changing():
        name = change.name
        if name in failed:
            report.monitors.append(MonitorReport(name, change.action.value, "error", failed[name]))
        elif change.action is Action.STOP:
            report.monitors.append(MonitorReport(name, "stop", "stopped", change.reason))
        elif change.action is Action.UPDATE:
            report.monitors.append(MonitorReport(name, "update", "updated", change.reason))
        else:
            poll = polls.get(name) or {"status": "pending", "error": None}
            status = str(poll.get("status") or "pending")
            detail = {"ok": "first poll ok",
                      "failed": f"first poll failed: {poll.get('error')}",
                      "pending": f"not picked up within {wait:g}s"}.get(status, status)
            report.monitors.append(MonitorReport(name, change.action.value, status, detail))
    return report
