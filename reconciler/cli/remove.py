"""``monitors remove NAME``: delete a user monitor file (built-ins are paused, not removed)."""

from __future__ import annotations

import json

import click

from reconciler import errors
from reconciler.cli.overlay_cmds import finish, load, settings_of, shown
from reconciler.config.authoring import arguments, userfiles


@click.command("remove")
@click.argument("name")
@click.option("--commit", is_flag=True, help="Commit the deletion with a generated message.")
@click.option("--apply", "apply", is_flag=True, help="Apply the change at once.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def command(ctx: click.Context, name: str, commit: bool, apply: bool, as_json: bool) -> int:
    """Delete the user monitor file of NAME (monitors.d/NAME.yml).

    A built-in cannot be removed (system/ is pull-only): pause it instead. When the
    user file shadowed a built-in, the built-in applies again. An overlay left
    naming no monitor is deleted with the file.
    """
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
