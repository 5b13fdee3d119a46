"""``monitors apply [PLANFILE] [--yes] [--wait 30s] [--allow-mass-stop] [--json]``.

Computes the plan (or checks a saved one still matches), asks on a terminal
unless ``--yes``; without a terminal (or with ``--json``) and without ``--yes`` it
shows the plan and refuses, exit 1 (Terraform's ``apply`` without
``-auto-approve``). Starts the daemon when it is not running,
hands the change over and reports, per monitor, the first poll: ok, failed
with the error, still running after ``--wait``, or not picked up in time. Exit 0
when every change took, 1 otherwise, and 1 when a monitor or overlay file has
errors (named as ``plan`` names them; the valid changes are applied all the same).
Refuses (exit 1, one line) an invalid monitors.toml and a running daemon started
with other settings (another device, or monitors.toml edited since: it reads
monitors.toml only at start).
``apply_now`` is the same thing for other commands (``add --apply``, ``pause --apply``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from reconciler import durations, errors
from reconciler.cli import params

STATUS_STYLE = {"ok": "green", "stopped": "green", "updated": "green", "failed": "red",
                "pending": "yellow", "error": "red"}


NO_TERMINAL = "no terminal to confirm on: pass --yes to apply without asking"


def _confirm(plan: Any, *, color: bool) -> bool:
    from reconciler.render import plan as render

    click.echo(render.text(plan, color=color), nl=False, color=color)
    return click.confirm("Apply these changes?", default=False)


def _refuse(plan: Any, *, color: bool, as_json: bool) -> bool:
    """No terminal to ask on and no ``--yes``: show the plan, then refuse (never applies).

    Raises:
        errors.UsageError: always, with ``NO_TERMINAL``.
    """
    from reconciler.render import plan as render

    if as_json:
        click.echo(render.as_json(plan), nl=False)
    else:
        click.echo(render.text(plan, color=color), nl=False, color=color)
    raise errors.UsageError(NO_TERMINAL)


PENDING_EVERY = 5.0
"""Seconds between two "still pending" lines while waiting for first polls."""


class _Shown:
    """Prints ``apply``'s progress as it happens and remembers where it got to, so an
    interrupt can say what is running (``interrupted``)."""

    def __init__(self, *, log: Path, color: bool, plan_shown: bool, quiet: bool) -> None:
        self.log = log
        self.color = color
        self.plan_shown = plan_shown  # the confirmation prompt shows the plan itself
        self.quiet = quiet            # --json: stdout is for the report only
        self.last: Any = None
        self._next_pending = PENDING_EVERY

    def __call__(self, p: Any) -> None:
        from reconciler.client.handover import Step
        from reconciler.render import plan as render

        self.last = p
        if self.quiet:
            return
        if p.step is Step.PLANNED and not self.plan_shown:
            self.plan_shown = True
            click.echo(render.text(p.plan, color=self.color), nl=False, color=self.color)
        elif p.step is Step.STARTED:
            click.echo(f"Started the daemon (pid {p.pid}); it logs to {self.log}.")
        elif p.step is Step.HANDED and p.pending and p.wait > 0:
            click.echo(f"Waiting up to {durations.format(p.wait)} for the first poll of "
                       f"{_names(p.pending)}.")
        elif p.step is Step.PENDING and p.elapsed >= self._next_pending:
            self._next_pending = p.elapsed + PENDING_EVERY
            click.echo(f"  still pending after {p.elapsed:.0f}s: {_names(p.pending)}")

    def interrupted(self) -> str:
        """What to say on Ctrl-C: what runs now, and how to look (`list`) or stop (`stop`)."""
        from reconciler.client.handover import Step

        p = self.last
        if p is None or p.step is Step.PLANNED:
            return "Interrupted; nothing changed."
        look = "`monitors list` shows how it goes; `monitors stop` stops the daemon."
        if p.step is Step.STARTING:
            return f"Interrupted while starting the daemon; it may be running. {look}"
        who = f"the daemon (pid {p.pid})" if p.pid else "the daemon"
        if p.step is Step.STARTED:
            return (f"Interrupted: {who} was started and runs the monitors of the "
                    f"repository. {look}")
        if p.step is Step.HANDING:
            return f"Interrupted while handing the change to {who}; it may apply it. {look}"
        pending = f" (first poll still pending: {_names(p.pending)})" if p.pending else ""
        return f"Interrupted: {who} keeps running and applies the change{pending}. {look}"


def _names(names: tuple[str, ...], most: int = 8) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def apply_now(ctx_obj: Any, *, wait: float, yes: bool = True, plan_file: Path | None = None,
              allow_mass_stop: bool = False, as_json: bool = False,
              no_color: bool = False) -> int:
    """Apply the current plan through the daemon and print the per-monitor report.

    Shown as it happens (not with ``as_json``): the plan, "Started the daemon (pid N)",
    the monitors whose first poll is awaited and, every ``PENDING_EVERY`` seconds, those
    still pending. Ctrl-C says what keeps running and how to look or stop (exit 130).

    Args:
        ctx_obj: the CLI ``Context`` (``ctx.find_root().obj``).
        wait: seconds to wait for first polls.
        yes: do not ask. Without it, a plan with changes is confirmed on a terminal;
            with no terminal (or ``as_json``) it is shown and refused.

    Returns:
        0 when every change took (first polls ok), 1 otherwise, when declined, or when a
        file has errors (the valid changes are applied all the same); 130 on Ctrl-C.

    Raises:
        errors.PlanError: stale saved plan, mass-stop guard, daemon unreachable.
        errors.UsageError: changes to confirm, no ``yes`` and no terminal to ask on.
        errors.StateError: the state directory is unusable (read-only, not a directory).
    """
    from reconciler.client import control as client
    from reconciler.client import handover
    from reconciler.render import plan as render
    from reconciler.render import style, terminal

    cfg = ctx_obj.settings()
    color = style.enabled(sys.stdout, no_color=no_color)
    confirm: Callable[[Any], bool] | None = None
    if yes:
        confirm = None
    elif sys.stdin.isatty() and not as_json:
        confirm = lambda plan: _confirm(plan, color=color)  # noqa: E731
    else:
        confirm = lambda plan: _refuse(plan, color=color, as_json=as_json)  # noqa: E731
    shown = _Shown(log=cfg.state_dir / client.LOG_FILE, color=color,
                   plan_shown=confirm is not None, quiet=as_json)
    try:
        report = handover.apply(cfg, plan_file=plan_file, wait=wait,
                                allow_mass_stop=allow_mass_stop, confirm=confirm,
                                progress=shown)
    except KeyboardInterrupt:
        click.echo(file=sys.stderr)
        click.echo(shown.interrupted(), err=True)
        return errors.ExitCode.INTERRUPTED
    # files with errors: the valid changes are applied all the same, and the exit is 1
    # (as `plan`'s: Terraform's errors -> 1)
    bad = bool(report.plan.error_files)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return errors.ExitCode.OK if report.ok and not report.declined and not bad \
            else errors.ExitCode.ERROR
    if report.declined:
        click.echo("Apply cancelled; nothing changed.")
        return errors.ExitCode.ERROR
    if not report.monitors:  # the plan shown above ends with its summary
        return errors.ExitCode.ERROR if bad else errors.ExitCode.OK
    width = max(len(m.name) for m in report.monitors)
    for m in report.monitors:
        mark = style.paint(f"{m.status:<8}", color, fg=STATUS_STYLE.get(m.status))
        shown_line = terminal.escape(f"{m.name:<{width}}  {m.action}: {m.detail}")
        click.echo(f"  {mark} {shown_line}", color=color)
    ok = sum(1 for m in report.monitors if m.status in ("ok", "stopped", "updated"))
    click.echo(render.errors_text(report.plan, color=color), nl=False, color=color)
    click.echo(f"Applied: {ok} of {len(report.monitors)} changes took"
               f" (generation {report.generation}).{report.plan.errors_summary()}")
    return errors.ExitCode.OK if report.ok and not bad else errors.ExitCode.ERROR


@click.command("apply")
@click.argument("planfile", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask for confirmation (required without a terminal or with --json).")
@click.option("--wait", default="30s", show_default=True, type=params.DURATION,
              metavar="DURATION",
              help="How long to wait for the first poll of started monitors.")
@click.option("--allow-mass-stop", is_flag=True,
              help="Apply even when the plan stops more than half (or all) running monitors.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--no-color", is_flag=True, help="No ANSI colours (also NO_COLOR=1 or TERM=dumb; "
              "FORCE_COLOR=1 colours off a terminal).")
@click.pass_context
def command(ctx: click.Context, planfile: Path | None, yes: bool, wait: float,
            allow_mass_stop: bool, as_json: bool, no_color: bool) -> int:
    """Apply the plan: hand the change to the daemon (starting it if needed) and
    wait for the first poll of every started or replaced monitor."""
    return apply_now(ctx.find_root().obj, wait=wait, yes=yes, plan_file=planfile,
                     allow_mass_stop=allow_mass_stop, as_json=as_json, no_color=no_color)
