"""``monitors schema [--overlay]``: print a JSON Schema for editors (no repository needed)."""

from __future__ import annotations

import click


@click.command("schema")
@click.option("--overlay", is_flag=True, help="Print the overlay schema instead.")
def command(overlay: bool) -> int:
    """Print the monitor (or overlay) JSON Schema, draft 2020-12.

    Save it and point your editor's YAML language server at it, or use the
    modeline `# yaml-language-server: $schema=<path or URL>` in a monitor file.
    """
    from reconciler.config import schemas

    click.echo(schemas.text("overlay" if overlay else "monitor"), nl=False)
    return 0
