"""Plan against the live daemon, and hand a change over to it (``monitors plan``/``apply``).

``current_plan`` reads the layers and the running registry: with a daemon
running, ``running.json`` (published after each of its reconciles) is the
running state; without one, running state is empty and the applied set in
``running.json`` only supplies last-known-good versions. ``apply`` checks a
saved plan, the mass-stop guard, starts the daemon when needed, asks it to
reconcile and waits for first polls, telling a ``progress`` callback each step as
it happens (``Progress``: the plan, the daemon started, the change handed over, the
monitors still pending). No printing, no click: results are data.

Both refuse (an error, exit 1) what the daemon would not run: an invalid
monitors.toml (the daemon does not start with one), and a running daemon whose
settings differ from this command's (another device or root, or monitors.toml
edited since it started: the daemon reads it only at start). A plan made for
other settings is never handed to that daemon.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import errors, settings, snapshot, timestamps
from reconciler.client import control as client
from reconciler.daemon import protocol
from reconciler.model import MonitorName
from reconciler.planning import plan as plan_mod
from reconciler.planning import saved as saved_mod
from reconciler.planning.diff import ChangeKind
from reconciler.state import direrrors
from reconciler.state import registry as registry_mod

REQUEST_SLACK = 30.0
POLL_STEP = 1.0
"""Seconds of each ``first-polls`` request while waiting: how often progress is told."""


def _autopaused(state_dir: Path) -> dict[MonitorName, str]:
    from reconciler.state import store as store_mod

    return store_mod.Store(state_dir).autopause_reasons()


def _completed(state_dir: Path) -> dict[MonitorName, tuple[str, str]]:
    from reconciler.state import store as store_mod

    return store_mod.Store(state_dir).completions()


def current_plan(cfg: settings.Settings, *, allow_mass_stop: bool = False,
                 ref: str | None = None, against: Path | None = None,
                 follow: bool = False) -> plan_mod.Plan:
    """The plan a reconcile would carry out now on this device: the working tree
    (committed or not; in git mode too) against what runs here.

    Args:
        ref: plan what this ref's commit holds instead of the working tree
            (``plan --ref``; read from the object database, ``config.gitfollow``).
        against: plan against the running state in this export
            (``plan --against``, ``client.export``) instead of this device's daemon,
            for the export's device.
        follow: git mode's ``apply``: plan the followed ref's commit, fetched and
            verified as the daemon will (``gitfollow.Follower.head``).

    Raises:
        errors.StateError: ``running.json`` is from a newer version, or the state
            directory cannot be read.
        errors.ConfigError: the fleet file or settings are unusable, or monitors.toml's
            agents, routines, channels or owner are invalid (``monitors.toml: ...``).
        errors.UsageError: ``against`` is not an export.
        GitError: ``ref`` names no commit, or the root is in no git repository.
        client.SettingsMismatch: the running daemon runs with other settings
            (``client.settings_mismatch``).
    """
    if against is not None:
        from dataclasses import replace

        from reconciler.client import export

        exported = export.load(against, cfg.root)
        cfg = replace(cfg, device=exported.device)
        status: Any = None
        last_good = dict(exported.running)
        autopaused = dict(exported.autopaused)
        completed: dict[MonitorName, tuple[str, str]] = {}
        generation, git = exported.generation, exported.git
    else:
        with direrrors.state_errors(cfg.state_dir):
            status = client.status(cfg.state_dir)
            reg = registry_mod.load(cfg.state_dir)
            last_good = {n: e.monitor for n, e in reg.entries.items()}
            autopaused = _autopaused(cfg.state_dir)
            completed = _completed(cfg.state_dir)
        generation = int(status["generation"]) if status is not None else reg.generation
        git = (status.get("git") if status is not None else None) or reg.git
    snap = _read(cfg, ref, last_good, autopaused, completed, follow=follow)
    if snap.settings_error is not None:
        raise errors.ConfigError(settings_error_line(snap.settings_error))
    if against is None:
        client.check_settings(cfg, status)
    running = last_good if status is not None or against is not None else {}
    basis = plan_mod.Basis(
        device=cfg.device, daemon_running=status is not None,
        daemon_pid=status.get("pid") if status else None, generation=generation,
        digest=snap.digest, commit=snap.commit, dirty=snap.dirty, problems=tuple(snap.problems),
        created_at=timestamps.utc_seconds(), root=cfg.root, error_files=tuple(snap.error_files),
        settings_digest=protocol.settings_digest(cfg), git=git,
        against=str(against) if against is not None else "",
        owners={name: protocol.owner_role(status, name)
                for name, m in snap.desired.monitors.items() if m.owners})
    return plan_mod.make(snap.desired, running, basis, allow_mass_stop=allow_mass_stop)


def _read(cfg: settings.Settings, ref: str | None, last_good: dict[MonitorName, Any],
          autopaused: dict[MonitorName, str], completed: dict[MonitorName, tuple[str, str]],
          *, follow: bool = False) -> snapshot.Snapshot:
    """The snapshot of the working tree, or of ``ref``'s commit (``follow``: of the
    followed ref's) exported to a temporary directory (removed after reading)."""
    from reconciler.config import gitfollow

    git = gitfollow.git_settings(cfg) if follow and ref is None else None
    if ref is None and git is None:
        return snapshot.read(cfg, last_good=last_good, autopaused=autopaused,
                             completed=completed)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="monitors-plan-") as tmp:
        target = (gitfollow.Follower(cfg, git).head(Path(tmp)) if git is not None
                  else gitfollow.plan_target(cfg, str(ref), Path(tmp)))
        snap = snapshot.read(target.settings, last_good=last_good, autopaused=autopaused,
                             completed=completed, with_git=False)
        return snapshot.at_commit(snap, target.settings.root, cfg.root, target.commit)


def settings_error_line(message: str) -> str:
    """One line for an invalid monitors.toml: the message (it names ``monitors.toml``)
    and that nothing can be planned or applied until it is fixed."""
    named = message if settings.SETTINGS_FILE in message.partition(": ")[0] else \
        f"{settings.SETTINGS_FILE}: {message}"
    return f"{named} (the daemon does not start with an invalid {settings.SETTINGS_FILE}; fix it)"


def load_saved(path: Path) -> saved_mod.SavedPlan:
    """Read a ``plan --out`` file.

    Raises:
        errors.PlanError: unreadable, not JSON (``p.json is not a plan file saved by
            `monitors plan --out` (invalid JSON at line 1 column 1)``) or not a plan file.
    """
    not_a_plan = f"{path} is not a plan file saved by `monitors plan --out`"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise errors.PlanError(f"{path}: cannot read plan file: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise errors.PlanError(f"{not_a_plan} (invalid JSON at line {e.lineno} column "
                               f"{e.colno})") from e
    except UnicodeDecodeError as e:
        raise errors.PlanError(f"{not_a_plan} (not UTF-8 text)") from e
    except RecursionError as e:
        raise errors.PlanError(f"{not_a_plan} (JSON nested too deeply)") from e
    try:
        return saved_mod.SavedPlan.from_json(doc)
    except ValueError as e:
        raise errors.PlanError(f"{path}: {e}") from e


@dataclass(slots=True)
class MonitorReport:
    """What apply did to one monitor: ``status`` is ``ok`` (first poll ok), ``failed``,
    ``pending`` (first poll still running, or not picked up in time), ``stopped``,
    ``updated``, ``held`` or ``error``."""

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


class Step(enum.StrEnum):
    """The steps of ``apply`` a ``Progress`` reports, in order."""

    PLANNED = "planned"      # the plan is made and checked; nothing changed yet
    STARTING = "starting"    # no daemon runs: starting one
    STARTED = "started"      # a daemon was started (``pid``); it runs the repository
    HANDING = "handing"      # the change is being handed to the daemon (``pid``)
    HANDED = "handed"        # the daemon has the change (``pid``); ``pending`` to wait for
    PENDING = "pending"      # ``pending`` still have no first poll after ``elapsed`` s


@dataclass(frozen=True, slots=True)
class Progress:
    """One step of ``apply``, told as it happens.

    Attributes:
        step: which step.
        plan: the plan being applied.
        pid: the daemon's pid (``PLANNED`` when one runs, and every later step) when known.
        pending: monitors whose first poll is awaited (``HANDED``, ``PENDING``).
        elapsed: seconds spent waiting for first polls so far.
        wait: the most seconds that will be spent waiting.
    """

    step: Step
    plan: plan_mod.Plan
    pid: int | None = None
    pending: tuple[str, ...] = ()
    elapsed: float = 0.0
    wait: float = 0.0


def apply(
    cfg: settings.Settings,
    *,
    plan_file: Path | None = None,
    wait: float = 30.0,
    allow_mass_stop: bool = False,
    confirm: Callable[[plan_mod.Plan], bool] | None = None,
    progress: Callable[[Progress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ApplyReport:
    """Apply the current plan (or a saved one that still matches) through the daemon.

    In git mode the plan is the followed ref's commit (fetched first for a remote ref,
    verified under ``verify = "signed"``), never the working tree, and the daemon
    fetches and reconciles to it at once.

    The change is handed over at once (``reconcile``); the first polls are then
    awaited in steps of ``POLL_STEP`` seconds (``first-polls``), so ``progress`` hears
    which monitors are still pending. An interrupt (``KeyboardInterrupt``) while
    waiting leaves the daemon running the change.

    Args:
        plan_file: a ``monitors plan --out`` file; refused when stale.
        wait: seconds to wait for the first poll of each started or replaced monitor.
        confirm: asked with the plan before anything changes; False declines.
        progress: told each step (``Progress``) as it happens.
        clock: monotonic seconds (injectable for tests).

    Raises:
        errors.PlanError: stale saved plan (with what changed), mass-stop guard,
            the daemon could not be started or reached.
        errors.StateError: the state directory is unusable (read-only, not a directory).
    """
    plan = current_plan(cfg, allow_mass_stop=allow_mass_stop, follow=True)
    if plan_file is not None:
        saved = load_saved(plan_file)
        stale = saved_mod.stale_reasons(saved, plan)
        if stale:
            raise errors.PlanError(f"{plan_file}: saved plan is stale: " + "; ".join(stale) +
                                   " (run `monitors plan --out` again)")
    if plan.mass_stop:
        raise errors.PlanError(f"refused by the mass-stop guard: {plan.mass_stop}")
    def tell(step: Step, **fields: Any) -> None:
        if progress is not None:
            progress(Progress(step, plan, wait=wait, **fields))

    report = ApplyReport(plan)
    tell(Step.PLANNED, pid=plan.daemon_pid)
    if not plan.has_changes and plan.daemon_running:
        return report
    if confirm is not None and plan.has_changes and not confirm(plan):
        report.declined = True
        return report
    if not plan.daemon_running:
        tell(Step.STARTING)
        with direrrors.state_errors(cfg.state_dir):
            report.started_daemon = client.start_detached(cfg)
        tell(Step.STARTED, pid=report.started_daemon)
    # the daemon that gets the plan (ours, or one started meanwhile) runs our settings
    running = client.status(cfg.state_dir)
    client.check_settings(cfg, running)
    pid = running.get("pid") if running else report.started_daemon
    waited = [c.name for c in plan.changes
              if c.action in (ChangeKind.START, ChangeKind.REPLACE, ChangeKind.RENAME)]
    tell(Step.HANDING, pid=pid)
    reply = client.reconcile(cfg.state_dir, protocol.Reconcile(
        wait=0, names=tuple(waited), allow_mass_stop=allow_mass_stop), timeout=REQUEST_SLACK)
    report.generation = reply.get("generation")
    applied = reply.get("applied") or {}
    failed: dict[str, str] = applied.get("failed") or {}
    started = set(applied.get("started") or ())
    names = [n for n in dict.fromkeys([*applied.get("started", ()), *waited]) if n not in failed]
    tell(Step.HANDED, pid=pid, pending=tuple(names))
    polls = _first_polls(cfg, names, wait=wait, clock=clock, allow_mass_stop=allow_mass_stop,
                         tell=lambda pending, elapsed: tell(Step.PENDING, pid=pid,
                                                            pending=pending, elapsed=elapsed))
    for change in plan.changing():
        name = change.name
        if name in failed:
            report.monitors.append(MonitorReport(name, change.action.value, "error", failed[name]))
        elif change.action is ChangeKind.STOP:
            report.monitors.append(MonitorReport(name, "stop", "stopped", change.reason))
        elif change.action is ChangeKind.UPDATE:
            report.monitors.append(MonitorReport(name, "update", "updated", change.reason))
        else:
            poll = polls.get(name)
            status = str(poll["status"] if poll else "pending")
            if status == "ok":
                detail = "first poll ok"
            elif status == "failed":
                detail = f"first poll failed: {poll['error'] if poll else None}"
            elif status != "pending":
                detail = status
            else:
                detail = pending_detail(picked_up=poll is not None or name in started,
                                        wait=wait)
            report.monitors.append(MonitorReport(name, change.action.value, status, detail))
    return report


def _first_polls(cfg: settings.Settings, names: Sequence[str], *, wait: float,
                 clock: Callable[[], float], allow_mass_stop: bool,
                 tell: Callable[[tuple[str, ...], float], None]
                 ) -> dict[str, protocol.PollResult]:
    """name -> ``{"status", "error"}`` for the running ones of ``names`` (a name left out
    is not running), waiting up to ``wait`` seconds in ``POLL_STEP`` steps and telling
    the still pending ones after each step.

    Raises:
        errors.PlanError: the daemon could not be reached or answered with an error.
    """
    polls: dict[str, protocol.PollResult] = {}
    pending = list(names)
    began = clock()
    while pending:
        left = max(0.0, wait - (clock() - began))
        step = min(left, POLL_STEP)
        try:
            answered = client.first_polls(
                cfg.state_dir, protocol.FirstPolls(names=tuple(pending), wait=step),
                timeout=step + REQUEST_SLACK).get("firstPolls") or {}
        except errors.PlanError as e:
            if "unknown op" not in str(e):
                raise
            # a daemon of an older version: hand over again, and wait in one go
            answered = client.reconcile(cfg.state_dir, protocol.Reconcile(
                wait=left, names=tuple(pending), allow_mass_stop=allow_mass_stop),
                timeout=left + REQUEST_SLACK).get("firstPolls") or {}
            left = 0.0
        polls.update(answered)
        pending = [n for n in pending
                   if n in answered and answered[n].get("status") == "pending"]
        if not pending or left <= step:
            break
        tell(tuple(pending), clock() - began)
    return polls


def pending_detail(*, picked_up: bool, wait: float) -> str:
    """Why a started monitor has no first poll result after ``wait`` seconds: it runs
    and its first poll is still running, or the daemon did not pick it up."""
    if not picked_up:
        return f"not picked up within {wait:g}s"
    if wait <= 0:
        return "started; its first poll was not waited for (--wait 0)"
    return f"first poll still running after {wait:g}s"
