"""``monitors logs NAME [--limit N] [--json]``: a monitor's action output."""

from __future__ import annotations

import click

from reconciler.cli import runs


@click.command("logs")
@click.argument("name")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(min=1),
              help="Newest fires to show (1 or more).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx: click.Context, name: str, limit: int, as_json: bool) -> int:
    """Show the action output (run/routine output, delivery results) of NAME's latest fires."""
    return runs.show(ctx, name, what="logs", limit=limit, as_json=as_json)
