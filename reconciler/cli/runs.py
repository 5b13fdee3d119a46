"""``monitors runs NAME [--limit N] [--json]``: a monitor's fire history."""

from __future__ import annotations

import click


@click.command("runs")
@click.argument("name")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Newest fires to show (1 or more).")
@click.option("--json", "as_json", is_flag=True, help="Print the fire records as JSON.")
@click.pass_context
def command(ctx: click.Context, name: str, limit: int, as_json: bool) -> int:
    """Show NAME's fire history, newest first: id, status, event."""
    from reconciler.daemon import client, views
    from reconciler.render import monitors as render

    cfg = ctx.find_root().obj.settings()
    with client.state_errors(cfg.state_dir):
        records = views.runs(cfg, name, limit=limit)
    click.echo(render.as_json(records) if as_json else render.runs(name, records), nl=False)
    return 0
