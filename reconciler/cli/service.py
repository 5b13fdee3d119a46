"""``monitors service install [--user] [--print]``: a systemd unit for this repository's daemon.

The unit is ``client.service.unit_text``; ``--print`` shows it without writing.
After writing, the next commands are printed (``systemctl daemon-reload``,
``enable --now``); nothing is started here.
"""

from __future__ import annotations

import click

from reconciler import errors


@click.group("service")
def command() -> None:
    """Run the daemon as a systemd service."""


@command.command("install")
@click.option("--user", "user", is_flag=True,
              help="A user unit (~/.config/systemd/user) instead of a system one "
              "(/etc/systemd/system, needs root).")
@click.option("--print", "show", is_flag=True, help="Print the unit; write nothing.")
@click.option("--name", default="monitors.service", show_default=True,
              help="The unit's file name.")
@click.pass_context
def install(ctx: click.Context, user: bool, show: bool, name: str) -> int:
    """Write a Type=notify unit that runs `monitors run` for this repository."""
    from reconciler.client import service

    cfg = ctx.find_root().obj.settings()
    if not name.endswith(".service") or "/" in name:
        raise errors.UsageError(f"--name {name!r}: expected a file name ending in .service")
    text = service.unit_text(cfg, user=user)
    if show:
        click.echo(text, nl=False)
        return errors.ExitCode.OK
    path = service.unit_path(user=user, name=name)
    try:
        service.install(path, text)
    except OSError as e:
        raise errors.UsageError(f"{path}: cannot write the unit: {e.strerror or e}"
                                + ("" if user else " (use --user, or run as root)")) from e
    ctl = "systemctl --user" if user else "systemctl"
    click.echo(f"wrote {path}\nnext: {ctl} daemon-reload && {ctl} enable --now {name}")
    return errors.ExitCode.OK
