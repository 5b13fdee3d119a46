"""``monitors list [--wide] [--json]``: this device's monitors with scope, owner and liveness."""

from __future__ import annotations

import click


@click.command("list")
@click.option("--wide", "-w", is_flag=True,
              help="One long line per monitor with every column (condition, owner, liveness).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx: click.Context, wide: bool, as_json: bool) -> int:
    """List every monitor known here: status, source, action, then liveness (and the owner
    when it is another device) on an indented line; --wide adds condition and owner columns."""
    from reconciler.client import views
    from reconciler.render import monitors as render
    from reconciler.render import terminal

    data = views.rows(ctx.find_root().obj.settings())
    click.echo(render.as_json(data) if as_json
               else terminal.escape(render.listing(data, wide=wide)), nl=False)
    return 0
