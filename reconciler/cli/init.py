"""``monitors init [DIR]``: scaffold a monitors repository (``config.scaffold``).

Creates what is missing, leaves identical files alone (a second run changes
nothing, exit 0) and refuses, writing nothing, when a file exists with other
content (exit 1, the files named).
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler import __version__, errors

WHAT = {
    "monitors.d/example.yml": "an example monitor, with the schema modeline",
    ".gitignore": "keeps the state directory (.history/) out of git",
    "monitors.toml": "settings, every section commented",
    ".pre-commit-config.yaml": "the monitors-lint hook (`pre-commit install`)",
    ".github/workflows/monitors.yml": "CI: lint with annotations, then plan",
    "schemas/monitor.schema.json": "for editors (the modeline points here)",
    "schemas/overlay.schema.json": "for editors (generated overlays point here)",
}


@click.command("init")
@click.argument("directory", required=False, default=".",
                type=click.Path(path_type=Path))
def command(directory: Path) -> int:
    """Scaffold a monitors repository in DIRECTORY (default: here): monitors.d/ with an
    example monitor, .gitignore, monitors.toml, .pre-commit-config.yaml and a GitHub
    Actions workflow. Never overwrites a file; running it again changes nothing."""
    from reconciler.config import scaffold

    done = scaffold.write(directory, version=__version__)
    if not done.created and not done.appended:
        click.echo(f"{directory}: already a monitors repository as `monitors init` makes "
                   "it; nothing changed.")
        return errors.ExitCode.OK
    click.echo(f"Initialised a monitors repository in {directory}:")
    width = max(len(rel) for rel in [*done.created, *done.appended])
    for rel in done.created:
        click.echo(f"  + {rel:<{width}}  {WHAT.get(rel, '')}".rstrip())
    for rel in done.appended:
        click.echo(f"  ~ {rel:<{width}}  added {scaffold.STATE_LINE}")
    for rel in done.unchanged:
        click.echo(f"  = {rel:<{width}}  already there".rstrip())
    where = "" if directory == Path(".") else f"cd {directory} && "
    click.echo(f"Next: {where}monitors lint && monitors plan, then `monitors apply`.")
    return errors.ExitCode.OK
