"""``monitors lint [PATH...] [--format text|json|github] [--strict]``.

Exit codes: 0 clean (warnings allowed), 1 errors (or warnings with ``--strict``).
The core (``config.lint``) and the renderer are imported when the command runs,
so ``monitors lint`` loads no HTTP client, no asyncio and, unless a template
needs it, no Jinja2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler import errors

if TYPE_CHECKING:
    from reconciler.config.problems import Problem
    from reconciler.settings import Settings


def _settings(ctx: click.Context, paths: tuple[Path, ...]) -> tuple[Settings, bool]:
    """The repository's settings and True; outside a repository, files given on the
    command line are linted on their own (the working directory stands in for the
    root), and False."""
    from reconciler import settings

    obj = ctx.find_root().obj
    try:
        found: Settings = obj.settings()
        return found, True
    except errors.ConfigError:
        if not paths or obj.root is not None or settings.find_root(Path.cwd()) is not None:
            raise
    cwd = Path.cwd().resolve()
    return settings.Settings(root=cwd, user_dir=cwd / settings.USER_DIR,
                             system_dir=cwd / settings.SYSTEM_DIR,
                             overlays_dir=cwd / settings.USER_DIR / settings.OVERLAYS_DIR,
                             state_dir=cwd / settings.STATE_DIR,
                             fleet_file=cwd / settings.FLEET_FILE, device=""), False


def action_check(settings: Settings) -> tuple[Any, list[Problem]]:
    """The action check for ``lint.run``: ``actions.checks.bound`` (agent, routine and
    channel names against monitors.toml, a run's command), shared with ``plan`` and the
    daemon; or a ``settings`` problem when monitors.toml's agents, routines, channels or
    owner are invalid; with schema problems, the names its sections define are still
    looked up (``partial``), so one run reports everything."""
    from reconciler.actions import checks

    return checks.bound(settings, partial=True)


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              show_default=True, help="Output: text lines, a JSON list, or GitHub annotations.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too.")
@click.option("--no-cache", is_flag=True,
              help="Check every file again: neither read nor write the cache of per-file "
              "results (<state>/cache/).")
@click.pass_context
def command(ctx: click.Context, paths: tuple[Path, ...], fmt: str, as_json: bool,
            strict: bool, no_cache: bool) -> int:
    """Validate monitor and overlay files.

    With no PATH, lints the configured layers (system/, monitors.d/ and
    monitors.d/overlays/). With PATHs (files or directories), lints those, with
    the layers as context for cross-file checks. monitors.toml (its schema, its
    channel URLs, parsed by Apprise without sending) and the fleet file are
    checked every time. Exit 0 when clean (warnings allowed), 1 on errors (or on
    warnings with --strict). In a repository, the results of unchanged files come
    from a cache in the state directory (safe to delete; --no-cache skips it).
    """
    from reconciler.config import lint
    from reconciler.render import problems as render

    settings, in_repository = _settings(ctx, paths)
    check, problems = action_check(settings)
    if settings.toml.get("channels"):  # also beside other monitors.toml problems
        from reconciler.actions import channels

        problems += channels.url_problems(settings)
    cache = settings.state_dir if in_repository and not no_cache else None
    report = lint.run(settings, list(paths) or None, action_check=check, cache=cache)
    if not paths:  # the layers: say which completed monitors still have their files
        from reconciler.client import completed

        problems += completed.lint_problems(settings)
    report.problems = sorted(report.problems + problems)
    fmt = "json" if as_json else fmt
    click.echo(render.render(report.problems, fmt=fmt, monitors=report.monitors), nl=False)
    return errors.ExitCode.ERROR if report.failed(strict=strict) else errors.ExitCode.OK
