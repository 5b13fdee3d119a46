"""``monitors token create [--file PATH] [--force]``: a new random API token file (0600).

The file is ``[http] tokenFile`` of monitors.toml, else ``<state>/http.token``
(``reconciler.tokens``). The token itself is never printed: peers read it from
the file (or an environment variable named by ``tokenEnv`` in the fleet file).
A running daemon uses the new token after a restart.
"""

from __future__ import annotations

from pathlib import Path

import click

from reconciler import errors


@click.group("token")
def command() -> None:
    """Manage the bearer token of the daemon's HTTP API."""


@command.command("create")
@click.option("--file", "path", type=click.Path(path_type=Path, dir_okay=False),
              help="Write here instead of [http] tokenFile (default <state>/http.token).")
@click.option("--force", is_flag=True, help="Replace an existing token file.")
@click.pass_context
def create(ctx: click.Context, path: Path | None, force: bool) -> int:
    """Write a new random token (32 bytes, URL-safe) to the token file, mode 0600."""
    from reconciler import tokens

    cfg = ctx.find_root().obj.settings()
    target = path or tokens.token_file(cfg)
    if target.exists() and not force:
        raise errors.UsageError(f"{target} already exists; pass --force to replace it "
                                "(peers using the old token are then refused)")
    try:
        tokens.create(target)
    except OSError as e:
        raise errors.UsageError(f"{target}: cannot write the token file: "
                                f"{e.strerror or e}") from e
    click.echo(f"wrote a new token to {target} (mode 0600); restart the daemon to use it")
    return errors.ExitCode.OK
