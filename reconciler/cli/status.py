"""``monitors status [--json] [--export FILE]``: the daemon, its revisions, and an export.

``--export FILE`` writes this device's running state (``client.export``: names,
fingerprints, revisions, pauses; no secrets, no observations) for
``monitors plan --against FILE``; it works with the daemon stopped (``running.json``).
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler import errors


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--export", "export_to", metavar="FILE",
              type=click.Path(path_type=Path, dir_okay=False),
              help="Write this device's running state for `monitors plan --against FILE`.")
@click.pass_context
def command(ctx: click.Context, as_json: bool, export_to: Path | None) -> int:
    """Show whether the daemon runs, what it applied (git mode: the followed ref's
    last attempted and applied revisions, and the last git error)."""
    from reconciler.client import export, views
    from reconciler.render import monitors as render

    cfg = ctx.find_root().obj.settings()
    if export_to is not None:
        doc = export.write(cfg, export_to)
        click.echo(f"Exported {len(doc['monitors'])} running monitors of {doc['device']} to "
                   f"{export_to}.")
        return errors.ExitCode.OK
    data = views.status(cfg)
    if as_json:
        click.echo(render.as_json(data), nl=False)
    else:
        click.echo(render.status(data), nl=False)
    return errors.ExitCode.OK
