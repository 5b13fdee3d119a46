"""``monitors schema [--overlay | --settings | --fleet]``: print a JSON Schema for editors
(no repository needed)."""

from __future__ import annotations

import click

from reconciler import errors


@click.command("schema")
@click.option("--overlay", is_flag=True, help="Print the overlay schema instead.")
@click.option("--settings", is_flag=True,
              help="Print the monitors.toml schema instead (Taplo: `#:schema PATH`).")
@click.option("--fleet", is_flag=True, help="Print the fleet file (fleet.yaml) schema instead.")
def command(overlay: bool, settings: bool, fleet: bool) -> int:
    """Print the monitor JSON Schema (draft 2020-12), or another one of the shipped schemas.

    Save it and point your editor's YAML language server at it, or use the
    modeline `# yaml-language-server: $schema=<path or URL>` in a monitor file.
    For monitors.toml, Taplo (Even Better TOML) reads `#:schema <path>` on the
    file's first line.
    """
    from reconciler.config import schemas

    chosen = [kind for kind, on in (("overlay", overlay), ("settings", settings),
                                    ("fleet", fleet)) if on]
    if len(chosen) > 1:
        raise errors.UsageError("schema: give at most one of --overlay, --settings, --fleet")
    kind: schemas.Kind = "monitor"
    if chosen == ["overlay"]:
        kind = "overlay"
    elif chosen == ["settings"]:
        kind = "settings"
    elif chosen == ["fleet"]:
        kind = "fleet"
    click.echo(schemas.text(kind), nl=False)
    return 0
