"""``monitors stop [--wait 30s]``: stop the daemon of this state directory (SIGTERM)."""

from __future__ import annotations

import click

from reconciler import durations, errors
from reconciler.cli import params
from reconciler.cli.main import Context


@click.command("stop")
@click.option("--wait", default="30s", show_default=True, type=params.DURATION,
              metavar="DURATION", help="How long to wait for the daemon to exit.")
@click.pass_context
def command(ctx: click.Context, wait: float) -> int:
    """Stop the daemon that holds this state directory, cleanly (SIGTERM): evaluators
    stop, in-flight state writes finish, the lock is released. `monitors apply` or
    `monitors run` starts it again."""
    from reconciler.client import stopper

    obj: Context = ctx.obj
    cfg = obj.settings()
    done = stopper.stop(cfg.state_dir, wait=wait)
    if done.pid is None:
        click.echo(f"No daemon is running for {cfg.state_dir}.")
        return errors.ExitCode.OK
    if not done.stopped:
        raise errors.StateError(f"daemon pid {done.pid} did not exit within "
                                f"{durations.format(wait)} (it is still running)")
    click.echo(f"Stopped the daemon (pid {done.pid}).")
    return errors.ExitCode.OK
