"""``monitors plan [--json] [--out FILE] [--detailed-exitcode] [--no-color]``.

Exit codes follow Terraform (errors -> 1, and ``-detailed-exitcode``): the whole
plan is always printed (valid monitors planned, invalid files shown with their
errors), then the exit code is 1 when any monitor or overlay file has an error;
else, with ``--detailed-exitcode``, 2 when something would change; else 0.

No plan at all (exit 1, one line) when monitors.toml is invalid, or when the
running daemon runs with other settings than this command (another device, or
monitors.toml edited since it started: it must be restarted to use them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from reconciler import errors


@click.command("plan")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--out", "out", type=click.Path(path_type=Path, dir_okay=False),
              help="Save the plan (versioned JSON) for `monitors apply FILE`.")
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 1 when a file has errors, else 2 when something would change, "
              "else 0.")
@click.option("--no-color", is_flag=True, help="No ANSI colours (also NO_COLOR=1 or TERM=dumb; "
              "FORCE_COLOR=1 colours off a terminal).")
@click.option("--unchanged", "show_unchanged", is_flag=True, help="List unchanged monitors too.")
@click.option("--allow-mass-stop", is_flag=True,
              help="Plan as `apply --allow-mass-stop` would (stops not held).")
@click.option("--ref", "ref", metavar="REF",
              help="Plan what the commit of REF (branch, tag, commit) holds instead of the "
              "working tree.")
@click.option("--against", "against", metavar="FILE",
              type=click.Path(path_type=Path, dir_okay=False),
              help="Plan against the running state exported by `monitors status --export` "
              "(for that device) instead of this device's daemon.")
@click.option("--device", "device", metavar="NAME",
              help="Plan this tree for fleet device NAME against its running state (asked "
              "over its HTTP API).")
@click.pass_context
def command(ctx: click.Context, as_json: bool, out: Path | None, detailed_exitcode: bool,
            no_color: bool, show_unchanged: bool, allow_mass_stop: bool, ref: str | None,
            against: Path | None, device: str | None) -> int:
    """Show what a reconcile would start, stop, replace and update on this device.

    Invalid files do not hide the rest: valid monitors are planned, and an invalid
    one is shown kept at its last applied version with its error (an action naming
    an agent, routine or channel monitors.toml lacks makes a file invalid too). Exit 1
    when any monitor or overlay file has an error (`monitors lint` shows them all),
    when monitors.toml is invalid, or when the running daemon was started with other
    settings (restart it to use the new ones).

    In git mode too this plans the working tree (committed or not) against what runs
    here; --ref plans a commit, --against an exported device.
    """
    from reconciler.client import handover
    from reconciler.config import lint
    from reconciler.render import plan as render
    from reconciler.render import style

    cfg = ctx.find_root().obj.settings()
    if device is not None and device != cfg.device:
        from reconciler.client import fleet

        plan = fleet.plan_for_device(cfg, device)
    else:
        with lint.no_cyclic_gc():  # as lint does: the load's objects all stay alive
            plan = handover.current_plan(cfg, allow_mass_stop=allow_mass_stop, ref=ref,
                                         against=against)
    if out is not None:
        from reconciler import atomic

        try:
            atomic.write_bytes(out, (json.dumps(plan.to_json(), indent=2) + "\n").encode(),
                               durable=True, mode=0o644)
        except OSError as e:
            raise errors.UsageError(f"{out}: cannot write the plan: {e.strerror}") from e
    if as_json:
        click.echo(render.as_json(plan), nl=False)
    else:
        color = style.enabled(sys.stdout, no_color=no_color)
        click.echo(render.text(plan, color=color, show_unchanged=show_unchanged), nl=False,
                   color=color)
        if out is not None:
            click.echo(f"Saved the plan to {out}: apply it with `monitors apply {out}`.")
    if plan.error_files:
        return errors.ExitCode.ERROR
    if detailed_exitcode and plan.has_changes:
        return errors.ExitCode.CHANGES
    return errors.ExitCode.OK
