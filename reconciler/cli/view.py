"""``monitors view NAME [--json]``: one monitor in full."""

from __future__ import annotations

import click


@click.command("view")
@click.argument("name")
@click.option("--fires", default=10, show_default=True, type=click.IntRange(min=0),
              help="Recent fires to show (0: none).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def command(ctx: click.Context, name: str, fires: int, as_json: bool) -> int:
    """Show one monitor: resolved config with origin and scope, fingerprint, liveness,
    current condition state and recent fires."""
    from reconciler.client import views
    from reconciler.render import monitors as render
    from reconciler.render import terminal
    from reconciler.state import direrrors

    cfg = ctx.find_root().obj.settings()
    with direrrors.state_errors(cfg.state_dir):
        data = views.view(cfg, name, fires=fires)
    click.echo(render.as_json(data) if as_json else terminal.escape(render.view(data)),
               nl=False)
    return 0
