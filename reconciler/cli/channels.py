"""``monitors channels test NAME [--json]``: send one test message through a channel.

Exit codes: 0 when Apprise reported the message delivered; 1 when it failed (the
outcome, with the HTTP status when Apprise reports one), when the channel is not
defined, or when a ``${NAME}`` of its URL is not set. The core is
``actions.channels.send_test``.
"""

from __future__ import annotations

import json
import os

import click

from reconciler import errors
from reconciler.render import terminal


@click.group("channels")
def command() -> None:
    """Notify channels of monitors.toml ([channels.NAME])."""


@command.command("test")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def test(ctx: click.Context, name: str, as_json: bool) -> int:
    """Send one test message through channel NAME and print the outcome.

    One attempt, within the channel's timeout; ${NAME} parts of its URL come from
    the environment, as in the daemon (their values are never printed).
    """
    from reconciler.actions import channels, checks, options
    from reconciler.config import settings_check

    cfg = ctx.find_root().obj.settings()
    _, problems = checks.bound(cfg)
    line = settings_check.summary(problems)
    if line is not None:
        raise errors.ConfigError(line)
    config = options.parse(cfg.toml)
    spec = config.channels.get(name)
    if spec is None:
        known = ", ".join(sorted(config.channels))
        raise errors.NotFoundError(f"no channel {name!r} in monitors.toml (known: {known})")
    try:
        outcome = channels.send_test(spec, environ=os.environ)
    except errors.ActionError as e:
        message = str(e) if str(e).startswith(f"{name}:") else f"{name}: {e}"
        raise errors.ActionError(message) from e
    if as_json:
        click.echo(json.dumps({"channel": name, "ok": outcome.ok, "status": outcome.status,
                               "detail": list(outcome.detail)}, indent=2))
    else:
        status = f" (HTTP {outcome.status})" if outcome.status is not None else ""
        if outcome.ok:
            click.echo(f"{name}: sent a test message{status}")
        else:
            said = f": {'; '.join(outcome.detail)}" if outcome.detail else ""
            click.echo(terminal.escape(f"{name}: failed{status}{said}"))
    return errors.ExitCode.OK if outcome.ok else errors.ExitCode.ERROR
