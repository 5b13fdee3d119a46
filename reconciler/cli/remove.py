"""``monitors remove NAME``: delete a user monitor file (built-ins are paused, not removed)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from reconciler import errors
from reconciler.cli.overlay_cmds import finish, load, settings_of, shown
from reconciler.config.authoring import arguments, userfiles


@click.command("remove")
@click.argument("name", required=False)
@click.option("--completed", is_flag=True,
              help="Remove every completed monitor's file (until, stopAfter, stopWhen); a "
              "completed built-in is paused instead.")
@click.option("--commit", is_flag=True, help="Commit the deletion with a generated message.")
@click.option("--apply", "apply", is_flag=True, help="Apply the change at once.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def command(ctx: click.Context, name: str | None, completed: bool, commit: bool, apply: bool,
            as_json: bool) -> int:
    """Delete the user monitor file of NAME (monitors.d/NAME.yml).

    A built-in cannot be removed (system/ is pull-only): pause it instead. When the
    user file shadowed a built-in, the built-in applies again. An overlay left
    naming no monitor is deleted with the file. With --completed (and no NAME), the
    monitors that ended themselves are removed (built-ins: paused).
    """
    if completed:
        if name is not None:
            raise errors.UsageError("give NAME or --completed, not both")
        return _remove_completed(ctx, commit=commit, apply=apply, as_json=as_json)
    if name is None:
        raise errors.UsageError("give the NAME of the monitor to remove (or --completed)")
    arguments.check_name(name)
    settings = settings_of(ctx)
    removed = userfiles.remove(settings, name, loaded=load(settings))
    paths = [removed.path] + ([removed.overlay] if removed.overlay else [])
    if as_json:
        click.echo(json.dumps({"monitor": name, "removed": [str(p) for p in paths],
                               "builtin": str(removed.builtin) if removed.builtin else None}))
    else:
        click.echo(f"removed {name}: {shown(settings, removed.path)}")
        if removed.overlay:
            click.echo(f"removed its overlay {shown(settings, removed.overlay)}")
        if removed.builtin:
            click.echo(f"the built-in {shown(settings, removed.builtin)} applies again "
                       "(and follows upstream)")
    return finish(ctx, settings, paths, message=f"monitors: remove {name}", commit=commit,
                  apply=apply) or errors.ExitCode.OK


def _remove_completed(ctx: click.Context, *, commit: bool, apply: bool, as_json: bool) -> int:
    """``remove --completed``: user files removed, built-ins paused (an overlay)."""
    from reconciler.client import completed as completed_mod
    from reconciler.config import gitworktree
    from reconciler.config.authoring import overlayedit
    from reconciler.model import Scope

    settings = settings_of(ctx)
    loaded = load(settings)
    rows: list[dict[str, object]] = []
    paths: list[Path] = []
    for monitor, reason in completed_mod.completed(settings, loaded=loaded):
        if monitor.scope is Scope.SYSTEM:
            [paused] = overlayedit.pause(
                settings, [monitor.name], reason=f"completed ({reason})", until=None,
                author=gitworktree.author(settings),
                command=arguments.command_line(["remove", "--completed"]))
            paths.append(paused.path)
            rows.append({"monitor": monitor.name, "paused": str(paused.path),
                         "reason": reason})
            line = f"paused the built-in {monitor.name} (completed: {reason}): " \
                f"{shown(settings, paused.path)}"
        else:
            removed = userfiles.remove(settings, monitor.name, loaded=loaded)
            paths += [removed.path] + ([removed.overlay] if removed.overlay else [])
            rows.append({"monitor": monitor.name, "removed": str(removed.path),
                         "reason": reason})
            line = f"removed {monitor.name} (completed: {reason}): " \
                f"{shown(settings, removed.path)}"
        if not as_json:
            click.echo(line)
    if as_json:
        click.echo(json.dumps({"completed": rows}))
    elif not rows:
        click.echo("no completed monitors")
        return errors.ExitCode.OK
    if not paths:
        return errors.ExitCode.OK
    names = ", ".join(str(r["monitor"]) for r in rows)
    return finish(ctx, settings, paths, message=f"monitors: remove completed {names}",
                  commit=commit, apply=apply) or errors.ExitCode.OK
