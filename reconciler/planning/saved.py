"""A saved plan (``monitors plan --out``) and whether it still applies.

A saved plan is tied to what it was made against: the repository commit, the
loader digest (``system/``, ``monitors.d/`` and overlays), a digest of the
desired set (covers fleet, device and expired pauses), the digest of
monitors.toml (``settingsDigest``), the running generation, and whether a
daemon ran (and its pid): its running set is what the plan was diffed against.
``stale_reasons`` compares a saved plan with a fresh one. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.planning.plan import PLAN_FORMAT, PLAN_VERSION, Plan


@dataclass(frozen=True, slots=True)
class SavedPlan:
    """What a saved plan file is checked against (``monitors apply PLANFILE``)."""

    commit: str | None
    digest: str
    desired_digest: str
    generation: int
    device: str
    summary: str
    doc: Mapping[str, Any]
    settings_digest: str = ""
    daemon_running: bool | None = None
    daemon_pid: int | None = None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SavedPlan:
        """Parse a ``Plan.to_json`` document.

        Raises:
            ValueError: not a plan file, or a newer version than this one reads.
        """
        if not isinstance(doc, Mapping) or doc.get("format") != PLAN_FORMAT:
            raise ValueError("not a monitors plan file (format is not 'monitors-plan')")
        version = doc.get("version")
        if not isinstance(version, int) or version > PLAN_VERSION:
            raise ValueError(f"plan file version {version!r} is newer than this monitors "
                             f"reads ({PLAN_VERSION})")
        daemon = doc.get("daemon")
        daemon = daemon if isinstance(daemon, Mapping) else {}
        running = daemon.get("running")
        pid = daemon.get("pid")
        try:
            return cls(daemon_running=running if isinstance(running, bool) else None,
                       daemon_pid=pid if isinstance(pid, int) and not isinstance(pid, bool)
                       else None,
                       commit=doc.get("commit"), digest=str(doc["digest"]),
                       desired_digest=str(doc["desiredDigest"]),
                       generation=int(doc["generation"]), device=str(doc["device"]),
                       summary=str(doc.get("summary", "")), doc=doc,
                       settings_digest=str(doc.get("settingsDigest") or ""))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"plan file is missing a field: {e}") from e


def stale_reasons(saved: SavedPlan, current: Plan) -> list[str]:
    """What moved since ``saved`` was made; empty when it still applies.

    Besides files, commit, device, settings and generation: a daemon that was running
    and is not now (its running set was what the plan diffed against; without one the
    running set is empty), one that started since, or one restarted (another pid).
    """
    reasons = []
    if saved.device != current.device:
        reasons.append(f"device changed from {saved.device} to {current.device}")
    if saved.commit != current.commit:
        reasons.append(f"repository commit changed from {_short(saved.commit)} to "
                       f"{_short(current.commit)}")
    if saved.digest != current.digest:
        reasons.append("monitor, system or overlay files changed since the plan was made")
    elif saved.desired_digest != current.desired_digest:
        reasons.append("the desired set changed (fleet file, device, a pause expiry or an "
                       "auto-pause)")
    if saved.settings_digest and current.settings_digest and \
            saved.settings_digest != current.settings_digest:
        reasons.append("monitors.toml changed since the plan was made")
    reasons.extend(_daemon_reasons(saved, current))
    if saved.generation != current.generation:
        reasons.append(f"running generation changed from {saved.generation} to "
                       f"{current.generation} (the daemon reconciled since)")
    return reasons


def _daemon_reasons(saved: SavedPlan, current: Plan) -> list[str]:
    """The running state a plan is diffed against is the daemon's (empty without one):
    a daemon that stopped, started or was restarted since makes the plan stale. Plans
    saved without a ``daemon`` entry are not checked."""
    if saved.daemon_running is None:
        return []
    if saved.daemon_running and not current.daemon_running:
        return [f"the daemon was running when the plan was made (pid {saved.daemon_pid}) "
                "and is not now"]
    if not saved.daemon_running and current.daemon_running:
        return [f"the daemon was not running when the plan was made and is now (pid "
                f"{current.daemon_pid})"]
    if saved.daemon_running and saved.daemon_pid is not None and \
            current.daemon_pid is not None and saved.daemon_pid != current.daemon_pid:
        return [f"the daemon was restarted since the plan was made (pid {saved.daemon_pid}, "
                f"now {current.daemon_pid})"]
    return []


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(no commit)"


