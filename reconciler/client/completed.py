"""Completed self-ending monitors whose files remain: ``lint``'s info and ``monitors
remove --completed`` (the read half; the CLI writes through ``config.authoring``).

A monitor with ``until``/``stopAfter``/``stopWhen`` that completed (``state.lifecycle``)
no longer runs, but its file stays until someone removes it; these helpers find the
ones whose completion still holds (the record's key is the monitor's current
``conditions.lifecycle.key``).
"""

from __future__ import annotations

from typing import Any

from reconciler import settings
from reconciler.conditions import lifecycle
from reconciler.config.problems import Problem
from reconciler.model import Monitor, Severity

RULE = "completed"


def completed(cfg: settings.Settings, *, loaded: Any = None) -> list[tuple[Monitor, str]]:
    """``(monitor, reason)`` for every defined monitor whose completion holds, by name
    (a paused one is left out: ``remove --completed`` already paused that built-in).

    Args:
        loaded: a ``config.loader.load`` result to reuse (loaded here when None and
            there is any completion at all).
    """
    from reconciler.state import store as store_mod

    if not (cfg.state_dir / "monitors").is_dir():
        return []
    done = store_mod.Store(cfg.state_dir, readonly=True).completions()
    if not done:
        return []
    if loaded is None:
        from reconciler.config import loader

        loaded = loader.load(cfg)
    out = []
    for name in sorted(done):
        key, reason = done[name]
        monitor = loaded.monitors.get(name)
        if monitor is not None and monitor.pause is None and lifecycle.key(monitor) == key:
            out.append((monitor, reason))
    return out


def lint_problems(cfg: settings.Settings) -> list[Problem]:
    """An info problem (rule ``completed``) per completed monitor whose file remains."""
    from reconciler.config.files import display

    out = []
    for monitor, reason in completed(cfg):
        message = (f"{monitor.name} completed ({reason}); its file remains "
                   "(`monitors remove --completed` removes it)")
        out.append(Problem(display(monitor.origin), monitor.line, 1, "", message,
                           Severity.INFO, RULE))
    return out
