"""``monitors layers``: every built-in and what the user layer does to it (like
``systemd-delta``): shadowed by a redundant copy, overridden by a different one
(no longer follows upstream), paused or pinned by an overlay, or untouched."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from reconciler import errors
from reconciler import fleet as fleet_mod
from reconciler.cli.overlay_cmds import load, settings_of, shown
from reconciler.planning import placement
from reconciler.settings import Settings

KINDS = ("redundant", "overridden", "paused", "pause-expired", "pinned", "invalid", "untouched")


@dataclass
class Row:
    """One built-in's entry: its tags (``KINDS``), the user file or overlay, details."""

    name: str
    system_file: Path
    kinds: list[str] = field(default_factory=list)
    user_file: Path | None = None
    overlay: Path | None = None
    details: list[str] = field(default_factory=list)
    placement: str = ""


def report(settings: Settings, loaded: Any, fleet: fleet_mod.Fleet) -> list[Row]:
    """The layer report: one ``Row`` per built-in, by name."""
    rows: list[Row] = []
    builtins = sorted((p for p, kind in loaded.checked if kind == "system"), key=lambda p: p.stem)
    for path in builtins:
        name = path.stem
        row = Row(name, path)
        shadow = loaded.shadowed.get(name)
        if shadow is not None:
            row.user_file = Path(shadow.user_file)
            if shadow.same_behaviour:
                row.kinds.append("redundant")
                row.details.append("same behaviour: delete the user copy to follow upstream")
            else:
                row.kinds.append("overridden")
                row.details.append("differs from the built-in: no longer follows upstream")
        elif name in loaded.invalid and Path(loaded.invalid[name]) == path:
            row.kinds.append("invalid")
            row.details.append("the built-in does not load: see `monitors lint`")
        overlay = loaded.overlays.get(name)
        monitor = loaded.monitors.get(name)
        if overlay is not None:
            row.overlay = Path(overlay.path)
            if overlay.pause is not None:
                expired = monitor is not None and monitor.pause is None
                row.kinds.append("pause-expired" if expired else "paused")
                bits = [overlay.pause.reason or "no reason given"]
                if overlay.pause.until:
                    bits.append(f"{'expired' if expired else 'until'} {overlay.pause.until}")
                if overlay.pause.author:
                    bits.append(f"by {overlay.pause.author}")
                row.details.append("; ".join(bits))
            if overlay.pin:
                row.kinds.append("pinned")
                pin = overlay.pin
                row.details.append(f"device {pin['device']}" if pin.get("device")
                                   else f"devices {', '.join(pin.get('devices') or [])}")
        if not row.kinds:
            row.kinds.append("untouched")
        if monitor is not None:
            decision = placement.owner_decision(monitor, device=settings.device, fleet=fleet)
            row.placement = decision.reason
        rows.append(row)
    return rows


@click.command("layers")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> int:
    """Show every built-in (system/) and what the user layer does to it.

    REDUNDANT: a user copy with the same behaviour shadows it (delete the copy).
    OVERRIDDEN: a different user copy shadows it (no longer follows upstream).
    PAUSED / PINNED: an overlay in monitors.d/overlays/ patches it.
    UNTOUCHED: it runs as shipped.
    """
    settings = settings_of(ctx)
    rows = report(settings, load(settings), fleet_mod.load(settings.fleet_file))
    if as_json:
        click.echo(json.dumps([{
            "monitor": r.name, "kinds": r.kinds, "system": shown(settings, r.system_file),
            "user": shown(settings, r.user_file) if r.user_file else None,
            "overlay": shown(settings, r.overlay) if r.overlay else None,
            "details": r.details, "placement": r.placement,
        } for r in rows], indent=2))
        return errors.ExitCode.OK
    for r in rows:
        tag = "[" + "+".join(k.upper() for k in r.kinds) + "]"
        line = f"{tag:<14} {shown(settings, r.system_file)}"
        if r.user_file is not None:
            line += f" -> {shown(settings, r.user_file)}"
        if r.overlay is not None:
            line += f" <- {shown(settings, r.overlay)}"
        if r.details:
            line += "  (" + "; ".join(r.details) + ")"
        click.echo(line)
    counts = {k: sum(1 for r in rows if k in r.kinds) for k in KINDS}
    parts = [f"{n} {k}" for k, n in counts.items() if n]
    total = len(rows)
    click.echo(f"{total} built-in{'s' if total != 1 else ''}" + (": " + ", ".join(parts)
                                                                  if parts else ""))
    return errors.ExitCode.OK
