"""``monitors list [--json]``: this device's monitors with scope, owner and liveness."""

from __future__ import annotations

import click


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> int:
    """List every monitor known here: status, source, condition, action, owner, liveness."""
    from reconciler.daemon import views
    from reconciler.render import monitors as render

    data = views.rows(ctx.find_root().obj.settings())
    click.echo(render.as_json(data) if as_json else render.listing(data), nl=False)
    return 0
