"""Render a ``planning.plan.Plan`` as text (the shape of ``terraform plan``) or JSON.

Text, one block per change, symbol first, per-field changes indented below::

      + disk-headroom will be started: new file system/disk-headroom.yml
    -/+ ci-red will be replaced: fingerprint changed: new baseline
          ~ condition.match: "fail" -> "fail|error"
      ~ ci-red will be updated in place: rateLimit changed: updated in place, baseline kept
      - old will be stopped: removed file monitors.d/old.yml
      > b will be renamed from a: renamed from a: same fingerprint, state carried over
      ! broken is kept at its last applied version: monitors.d/broken.yml:3:5: error: ...

    Plan: 1 to start, 1 to replace, 1 to update, 1 to stop, 12 unchanged.

Colour (ANSI) only when ``color`` is True; the CLI decides (``style.enabled``:
``--no-color``, NO_COLOR, FORCE_COLOR, TERM=dumb, a terminal). Renderers never
compute: every word comes from the plan.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler import durations
from reconciler.planning.diff import DURATION_FIELDS, SYMBOLS, Change, ChangeKind, FieldChange
from reconciler.planning.plan import Plan
from reconciler.render import style, terminal
from reconciler.render.monitors import git_lines

COLORS: dict[ChangeKind, str] = {
    ChangeKind.START: "green",
    ChangeKind.STOP: "red",
    ChangeKind.REPLACE: "magenta",
    ChangeKind.UPDATE: "yellow",
    ChangeKind.RENAME: "cyan",
    ChangeKind.KEEP: "red",
    ChangeKind.UNCHANGED: "white",
}

VERBS: dict[ChangeKind, str] = {
    ChangeKind.START: "will be started",
    ChangeKind.STOP: "will be stopped",
    ChangeKind.REPLACE: "will be replaced",
    ChangeKind.UPDATE: "will be updated in place",
    ChangeKind.RENAME: "will be renamed",
    ChangeKind.KEEP: "is kept at its last applied version",
    ChangeKind.UNCHANGED: "is unchanged",
}

MAX_EXCLUDED = 20


def _value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def field_line(f: FieldChange) -> str:
    """``condition.match: "fail" -> "fail|error"``; a duration field (``DURATION_FIELDS``)
    as ``source.interval: 2s -> 3s`` (``durations.format``; JSON keeps seconds)."""
    def shown(value: Any) -> str:
        if f.path in DURATION_FIELDS and isinstance(value, int | float) \
                and not isinstance(value, bool):
            return durations.format(float(value))
        return _value(value)
    return f"{f.path}: {shown(f.old)} -> {shown(f.new)}"


def _style(text: str, color: bool, *, fg: str | None = None, bold: bool = False) -> str:
    """``text`` escaped for the terminal (it may quote a name or value), then coloured."""
    return style.paint(terminal.escape(text), color, fg=fg, bold=bold)


def change_lines(change: Change, *, color: bool) -> list[str]:
    """The text lines of one change."""
    symbol = SYMBOLS[change.action]
    fg = COLORS[change.action]
    verb = VERBS[change.action]
    if change.held:
        verb = "would be stopped (HELD by the mass-stop guard)"
    esc = terminal.escape
    head = f"{symbol:>3} {_style(change.name, color, bold=True)} {verb}: {esc(change.reason)}"
    if change.action is ChangeKind.RENAME and change.old_name:
        head = (f"{symbol:>3} {_style(change.name, color, bold=True)} {verb} from "
                f"{esc(change.old_name)}: same fingerprint, state carried over")
    if color:
        head = _style(f"{symbol:>3}", color, fg=fg, bold=True) + head[3:]
    lines = [head]
    for f in change.fields:
        lines.append(f"      ~ {esc(field_line(f))}")
    if change.error:
        lines.append(_style(f"      ! {change.error}", color, fg="red"))
    return lines


def text(plan: Plan, *, color: bool = False, show_unchanged: bool = False) -> str:
    """The human plan, ending in the one summary line (and a newline)."""
    out: list[str] = []
    where = f" at {plan.commit[:12]}{' (uncommitted changes)' if plan.dirty else ''}" \
        if plan.commit else ""
    out.append(f"Planning for device {plan.device}{where}.")
    out.extend(git_lines(dict(plan.git)) if plan.git else [])
    if plan.against:
        out.append(f"Running state from {plan.against} (exported by `monitors status "
                   f"--export`), generation {plan.generation}.")
    elif not plan.daemon_running:
        out.append(_style("The daemon is not running: running state is empty (`monitors apply` "
                          "or `monitors run` starts it).", color, fg="yellow"))
    else:
        out.append(f"Daemon running (pid {plan.daemon_pid}), running generation "
                   f"{plan.generation}.")
    out.append("")
    shown = [c for c in plan.changes
             if c.changing or c.action is ChangeKind.KEEP or (show_unchanged and c.action is
                                                          ChangeKind.UNCHANGED)]
    for change in shown:
        out.extend(change_lines(change, color=color))
    if shown:
        out.append("")
    if plan.owners:
        out.append("Failover owners (etcd):")
        out.extend(terminal.escape(f"    {name}: {role}")
                   for name, role in sorted(plan.owners.items()))
        out.append("")
    if plan.excluded:
        out.append("Not run on this device:")
        items = sorted(plan.excluded.items())
        for name, why in items[:MAX_EXCLUDED]:
            out.append(terminal.escape(f"    {name}: {why.reason}"))
        if len(items) > MAX_EXCLUDED:
            out.append(f"    ... and {len(items) - MAX_EXCLUDED} more (--json lists all)")
        out.append("")
    if plan.mass_stop:
        out.append(_style(f"Mass-stop guard: {plan.mass_stop}.", color, fg="red", bold=True))
        out.append("")
    out.extend(_errors_block(plan, color=color, so_far="\n".join(out)))
    out.append(_style(plan.summary(), color, bold=True, fg="red" if plan.error_files else None))
    return "\n".join(out) + "\n"


def _errors_block(plan: Plan, *, color: bool, so_far: str = "") -> list[str]:
    unshown = [p for p in plan.problems if ": error: " in p and p not in so_far]
    if not unshown:
        return []
    out = ["Errors:"]
    for line in unshown[:MAX_EXCLUDED]:
        out.append(_style(f"    {line}", color, fg="red"))
    if len(unshown) > MAX_EXCLUDED:
        out.append(f"    ... and {len(unshown) - MAX_EXCLUDED} more (`monitors lint` lists "
                   "all)")
    out.append("")
    return out


def errors_text(plan: Plan, *, color: bool = False) -> str:
    """The files with errors as ``plan`` shows them (``file:line:col: error: ...`` lines,
    else the file names), ending in a blank line; empty when ``plan.error_files`` is
    empty. ``monitors apply`` prints it before its summary."""
    if not plan.error_files:
        return ""
    out = _errors_block(plan, color=color)
    if not out:
        out = ["Files with errors:", *(_style(f"    {name}", color, fg="red")
                                       for name in plan.error_files), ""]
    return "\n".join(out) + "\n"


def as_json(plan: Plan) -> str:
    """The plan document (``Plan.to_json``) as indented JSON."""
    return json.dumps(plan.to_json(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"
