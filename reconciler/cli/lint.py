"""``monitors lint [PATH...] [--format text|json|github] [--strict]``.

Exit codes: 0 clean (warnings allowed), 1 errors (or warnings with ``--strict``).
The core (``config.lint``) and the renderer are imported when the command runs,
so ``monitors lint`` loads no HTTP client, no asyncio and, unless a template
needs it, no Jinja2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from reconciler import errors

if TYPE_CHECKING:
    from reconciler.settings import Settings


def _settings(ctx: click.Context, paths: tuple[Path, ...]) -> Settings:
    """The repository's settings; outside a repository, files given on the command
    line are linted on their own (the working directory stands in for the root)."""
    from reconciler import settings

    obj = ctx.find_root().obj
    try:
        found: Settings = obj.settings()
        return found
    except errors.ConfigError:
        if not paths or obj.root is not None or settings.find_root(Path.cwd()) is not None:
            raise
    cwd = Path.cwd().resolve()
    return settings.Settings(root=cwd, user_dir=cwd / settings.USER_DIR,
                             system_dir=cwd / settings.SYSTEM_DIR,
                             overlays_dir=cwd / settings.USER_DIR / settings.OVERLAYS_DIR,
                             state_dir=cwd / settings.STATE_DIR,
                             fleet_file=cwd / settings.FLEET_FILE, device="")


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text",
              show_default=True, help="Output: text lines, a JSON list, or GitHub annotations.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too.")
@click.pass_context
def command(ctx: click.Context, paths: tuple[Path, ...], fmt: str, strict: bool) -> int:
    """Validate monitor and overlay files.

    With no PATH, lints the configured layers (system/, monitors.d/ and
    monitors.d/overlays/). With PATHs (files or directories), lints those, with
    the layers as context for cross-file checks. Exit 0 when clean (warnings
    allowed), 1 on errors (or on warnings with --strict).
    """
    from reconciler.config import lint
    from reconciler.render import problems as render

    settings = _settings(ctx, paths)
    report = lint.run(settings, list(paths) or None)
    click.echo(render.render(report.problems, fmt=fmt, monitors=report.monitors), nl=False)
    return errors.ExitCode.ERROR if report.failed(strict=strict) else errors.ExitCode.OK
