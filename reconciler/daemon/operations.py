"""The daemon's control operations: one typed reply per typed request (``daemon.protocol``).

``Operations.answer`` is the control server's handler (``daemon.control``): it
reconciles on ``reconcile`` and ``clear-autopause``, waits for first polls, polls
out of schedule on ``evaluate-now`` and reports ``status``. It reads the daemon's
state through the ``Reconciler`` and its parts; it never touches sockets or
signals, and never parses wire JSON (``protocol.decode`` did).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from reconciler.daemon import reconcile as reconcile_mod
from reconciler.model import MonitorName

if TYPE_CHECKING:  # imported by the requests that need it (``run --once`` asks none)
    from reconciler.daemon import protocol

log = logging.getLogger("monitors.daemon")

FIRST_POLL_LOG_WAIT = 60.0
"""Seconds the daemon waits for a started monitor's first poll before logging it as late."""


class Operations:
    """Answers control requests for the daemon whose reconcile loop is ``reconciler``."""

    def __init__(self, reconciler: reconcile_mod.Reconciler) -> None:
        self.reconciler = reconciler
        self.endpoints: dict[str, str] = {}
        """What else the daemon serves, by name: ``{"http": "http://127.0.0.1:8765"}``
        (filled by the services themselves; in ``status`` as ``endpoints``)."""

    async def answer(self, request: protocol.Request) -> protocol.Reply:
        """The reply to one request (``daemon.protocol`` documents each).

        Raises:
            errors.MonitorsError: a reconcile failed (the server answers ``ok: false``).
        """
        from reconciler.daemon import protocol

        rec = self.reconciler
        match request:
            case protocol.Status():
                return self.status()
            case protocol.Reconcile():
                plan, applied = await rec.reconcile(
                    trigger="apply", allow_mass_stop=request.allow_mass_stop, fetch=True)
                names = list(dict.fromkeys([*applied.started,
                                            *(MonitorName(n) for n in request.names)]))
                names = [n for n in names if n in rec.registry.entries]
                polls = (await self.first_polls(names, request.wait)
                         if request.wait > 0 else {})
                return {"ok": True, "plan": plan.to_json(),
                        "generation": rec.registry.generation,
                        "applied": {"started": list(applied.started),
                                    "stopped": list(applied.stopped),
                                    "updated": list(applied.updated),
                                    "failed": {str(n): e for n, e in applied.failed.items()},
                                    "held": [c.name for c in applied.held]},
                        "firstPolls": polls}
            case protocol.FirstPolls():
                running = [MonitorName(n) for n in request.names
                           if MonitorName(n) in rec.registry.entries]
                return {"ok": True, "firstPolls": await self.first_polls(running, request.wait)}
            case protocol.EvaluateNow():
                return {"ok": True, "results": await self.evaluate_now(request.names)}
            case protocol.ClearAutopause():
                target = request.name
                cleared = (bool(rec.parts.guard.clear(target)) if rec.parts is not None
                           else False)
                plan, _ = await rec.reconcile(trigger=f"resume {target}")
                return {"ok": True, "cleared": cleared, "summary": plan.summary()}

    def status(self) -> protocol.StatusReply:
        """The ``status`` reply."""
        from reconciler.daemon import protocol

        rec = self.reconciler
        reg, last = rec.registry, rec.last
        return {
            "ok": True,
            "pid": os.getpid(),
            "device": rec.cfg.device,
            "root": str(rec.cfg.root),
            "stateDir": str(rec.cfg.state_dir),
            "startedAt": reg.daemon_started_at,
            "generation": reg.generation,
            "revision": {"commit": reg.commit, "dirty": reg.dirty},
            "git": protocol.git_status(rec.git.revisions.to_json()) if rec.git else None,
            "running": sorted(reg.entries),
            "held": list(reg.held),
            "problems": list(last.problems),
            "writeErrors": rec.parts.store.write_errors() if rec.parts is not None else {},
            "settingsDigest": protocol.settings_digest(rec.cfg),  # a SIGHUP may change it
            "lastReconcile": {"at": last.at, "summary": last.summary, "trigger": last.trigger},
            "endpoints": dict(self.endpoints),
            "streams": ({str(n): link for n, link in rec.parts.engine.links.items()}
                        if rec.parts is not None else {}),
            "owners": (rec.parts.engine.owners.snapshot()
                       if rec.parts is not None and rec.parts.engine.owners is not None
                       else None),
        }

    async def first_polls(self, names: list[MonitorName], timeout: float
                          ) -> dict[str, protocol.PollResult]:
        """name -> its first poll (``pending`` when not done) within ``timeout`` seconds."""
        if not names or self.reconciler.parts is None:
            return {}
        engine = self.reconciler.parts.engine
        raw = await engine.wait_first_poll(list(names), max(0.0, timeout))
        out: dict[str, protocol.PollResult] = {}
        for name in names:
            result = raw.get(name)
            if result is None:
                out[name] = {"status": "pending", "error": None}
            elif getattr(result, "ok", False):
                out[name] = {"status": "ok", "error": None}
            else:
                out[name] = {"status": "failed", "error": str(getattr(result, "error", ""))}
        return out

    async def evaluate_now(self, wanted: tuple[str, ...] | None
                           ) -> dict[str, protocol.PollResult]:
        """Poll ``wanted`` (every running monitor when None) once, now; name -> result."""
        rec = self.reconciler
        names = sorted(rec.registry.entries) if wanted is None else [
            MonitorName(n) for n in wanted]
        results: dict[str, protocol.PollResult] = {}
        for name in names:
            entry = rec.registry.entries.get(name)
            if entry is None or rec.parts is None:
                results[name] = {"status": "failed", "error": "not running on this device"}
                continue
            try:
                result = await rec.parts.engine.poll_once(entry.monitor)
                ok = bool(getattr(result, "ok", True))
                results[name] = {"status": "ok" if ok else "failed",
                                 "error": None if ok else str(getattr(result, "error", ""))}
            except Exception as e:
                results[name] = {"status": "failed", "error": str(e)}
        return results

    async def log_first_polls(self, names: list[MonitorName]) -> None:
        """Log the first poll of each of ``names`` (started by a reconcile), or that it is
        not done after ``FIRST_POLL_LOG_WAIT`` seconds; a monitor stopped or replaced
        meanwhile is left to its successor."""
        registry = self.reconciler.registry
        started = {n: registry.entries[n].monitor for n in names if n in registry.entries}
        results = await self.first_polls(list(started), FIRST_POLL_LOG_WAIT)
        for name, result in results.items():
            entry = registry.entries.get(MonitorName(name))
            if entry is None or entry.monitor is not started[MonitorName(name)]:
                continue  # stopped or replaced meanwhile: its successor reports
            if result["status"] == "ok":
                log.info("first poll ok: %s", name)
            elif result["status"] == "failed":
                log.warning("first poll failed: %s: %s", name, result["error"])
            else:
                log.warning("first poll of %s not done after %gs", name, FIRST_POLL_LOG_WAIT)
