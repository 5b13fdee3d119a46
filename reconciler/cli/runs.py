"""``monitors runs NAME [--limit N] [--json]``: a monitor's fire history.

``show`` is the body ``runs`` and ``logs`` share: read one ``client.views`` list,
then print it as JSON or through the ``render.monitors`` function of the same name.
"""

from __future__ import annotations

from typing import Literal

import click


def show(ctx: click.Context, name: str, *, what: Literal["runs", "logs"], limit: int,
         as_json: bool) -> int:
    """Print ``views.<what>(cfg, name, limit=limit)`` as text (``render.<what>``) or JSON.

    Args:
        what: ``"runs"`` (fire records) or ``"logs"`` (action output of the fires).
        limit: newest fires to show (1 or more).

    Returns:
        The exit code (0).

    Raises:
        errors.NotFoundError: no layer defines ``name`` and it has no fires.
        errors.StateError: the state directory is unreadable (``state.direrrors.state_errors``).
    """
    from reconciler.client import views
    from reconciler.render import monitors as render
    from reconciler.render import terminal
    from reconciler.state import direrrors

    read, text = {"runs": (views.runs, render.runs), "logs": (views.logs, render.logs)}[what]
    cfg = ctx.find_root().obj.settings()
    with direrrors.state_errors(cfg.state_dir):
        items = read(cfg, name, limit=limit)
    click.echo(render.as_json(items) if as_json else terminal.escape(text(name, items)),
               nl=False)
    return 0


@click.command("runs")
@click.argument("name")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Newest fires to show (1 or more).")
@click.option("--json", "as_json", is_flag=True, help="Print the fire records as JSON.")
@click.pass_context
def command(ctx: click.Context, name: str, limit: int, as_json: bool) -> int:
    """Show NAME's fire history, newest first: id, status, event."""
    return show(ctx, name, what="runs", limit=limit, as_json=as_json)
