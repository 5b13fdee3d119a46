"""The core of ``monitors test`` and ``monitor_test`` (MCP): find a monitor, run one
dry evaluation (``daemon.dryrun.dry_run``) with the daemon's secrets registered, render
the action's templates within their budgets, and shape the result as JSON. Takes no
action and writes no state; prints nothing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from reconciler import errors
from reconciler.model import Monitor, MonitorName
from reconciler.settings import Settings


def find(settings: Settings, name: str) -> tuple[Monitor, list[Monitor]]:
    """The resolved monitor ``name`` and every valid monitor of the layers.

    Raises:
        errors.NotFoundError: no layer defines it.
        errors.ConfigError: its file is invalid (the first problem is named).
    """
    from reconciler.config import loader

    loaded = loader.load(settings)
    key = MonitorName(name)
    monitor = loaded.monitors.get(key)
    if monitor is not None:
        return monitor, list(loaded.monitors.values())
    if key in loaded.invalid:
        file = loaded.invalid[key]
        first = next((p for p in loaded.problems if Path(p.file).name == Path(file).name), None)
        detail = first.format() if first is not None else f"{file}: invalid"
        raise errors.ConfigError(f"monitor {name!r} is invalid: {detail}")
    raise errors.NotFoundError(
        f"no monitor named {name!r} (see `monitors list`; files live in {settings.user_dir})")


def summary_line(monitor: Monitor) -> str:
    """``poll: cmd every 30s  ·  match /fail/  ·  run claude``."""
    from reconciler.conditions import registry as condition_registry

    return "  ·  ".join((str(monitor.source.describe()),
                         condition_registry.describe(monitor.condition),
                         monitor.action.describe()))


def action_preview(monitor: Monitor, event: Any) -> dict[str, Any]:
    """What the action would do with ``event`` (templates rendered, nothing run)."""
    from reconciler.actions import registry, templating

    action = monitor.action
    kind = registry.kind(action)
    out: dict[str, Any] = {"type": kind.TYPE}
    for template in kind.TEMPLATES:
        text = getattr(action, template)
        if text is not None:
            try:
                out[template] = templating.render(str(text), templating.context(monitor, event))
            except errors.ActionError as e:
                out["error"] = str(e)
    out["text"] = kind.preview(action)
    return out


def dry_run(settings: Settings, monitor: Monitor, known: list[Monitor],
            pushed: Any = None) -> Any:
    """``dryrun.dry_run`` with the secrets ``known`` monitors and monitors.toml
    reference registered, as the daemon registers them: what ``test`` shows is what
    the daemon would record. ``pushed``: what a push source evaluates instead of a
    check (``--payload``/``--frame``: an observation or a ``select`` error)."""
    from reconciler import fleet, redaction
    from reconciler.daemon import dryrun
    from reconciler.sources.context import SourceContext
    from reconciler.state import store as store_mod

    store = store_mod.Store(settings.state_dir, readonly=True)
    fleet_ = fleet.load(settings.fleet_file)

    async def go() -> dryrun.DryRun:
        redactor = redaction.Redactor(redaction.collect(known, settings.toml, os.environ))
        ctx = SourceContext.create(store=store, fleet=fleet_, settings=settings,
                                   dry_run=True, redactor=redactor)
        try:
            return await dryrun.dry_run(monitor, store=store, ctx=ctx, pushed=pushed)
        finally:
            await ctx.aclose()

    return asyncio.run(go())


def as_json(result: Any, preview: dict[str, Any] | None = None) -> dict[str, Any]:
    d, obs = result.decision, result.observation
    data: dict[str, Any] = {
        "monitor": result.monitor.name,
        "summary": summary_line(result.monitor),
        "fingerprint": result.monitor.fingerprint,
        "error": result.error,
        "autoPaused": result.paused,
        "storedState": result.previous,
        "observation": None,
        "wouldFire": bool(d and d.fire and not result.paused),
        "reason": str(d.reason) if d else None,
        "signature": d.signature if d else None,
        "event": result.event.to_json() if result.event else None,
        "action": None,
    }
    if obs is not None:
        data["observation"] = {"text": obs.text, "meta": dict(obs.meta),
                               "afterIgnore": d.observation if d else obs.text}
    if result.event is not None:
        data["action"] = preview or action_preview(result.monitor, result.event)
    return data
