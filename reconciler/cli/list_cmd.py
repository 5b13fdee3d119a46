"""``monitors list [--wide] [--json] [--local]``: the fleet's monitors with scope, owner
and liveness.

With peers in the fleet file (devices with an ``address``), every peer's
``/v1/monitors`` is asked at once (``client.fleet``, about 2 s each) and the rows
are tagged with their device; a peer that did not answer is named with its
error and the exit code is 4 (incomplete). ``--local`` lists this device only.
"""

from __future__ import annotations

import click

from reconciler import errors


@click.command("list")
@click.option("--wide", "-w", is_flag=True,
              help="One long line per monitor with every column (condition, owner, liveness).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--local", is_flag=True,
              help="This device only: do not ask the fleet's other devices.")
@click.pass_context
def command(ctx: click.Context, wide: bool, as_json: bool, local: bool) -> int:
    """List every monitor known here and on the fleet's other devices: status, source,
    action, then liveness (and the owner when it is another device) on an indented line;
    --wide adds condition and owner columns. Exit 4 when a device could not be reached."""
    from reconciler.client import fleet, views
    from reconciler.render import monitors as render
    from reconciler.render import terminal

    cfg = ctx.find_root().obj.settings()
    data = fleet.listing(cfg, views.rows(cfg), ask=not local)
    click.echo(render.as_json(data) if as_json
               else terminal.escape(render.listing(data, wide=wide)), nl=False)
    return errors.ExitCode.INCOMPLETE if data.get("unreachable") else errors.ExitCode.OK
