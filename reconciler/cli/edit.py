"""``monitors edit NAME``: open the user file in ``$EDITOR`` and lint the result.

Editing a built-in offers to create a shadowing user copy first (``--yes``
accepts without asking) and warns that the copy no longer receives upstream
fixes; a copy left unchanged is removed again. ``system/`` is never edited.
The editor command (``$VISUAL``, else ``$EDITOR``, else ``vi`` when stdin is a
terminal; with neither, it fails at once rather than start a ``vi`` that would
wait forever) is split with ``shlex`` and run without a shell.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import click

from reconciler import errors
from reconciler.cli.overlay_cmds import load, settings_of, shown
from reconciler.config.authoring import arguments, locate, userfiles


def editor_argv(*, interactive: bool | None = None) -> list[str]:
    """The editor command as argv: ``$VISUAL``, ``$EDITOR``, else ``vi`` on a terminal.

    Args:
        interactive: whether stdin is a terminal (default: ``sys.stdin.isatty()``).
            Without one, ``vi`` would wait for keys that never come, so an unset
            editor is an error instead.

    Raises:
        errors.UsageError: no editor set and no terminal, or the variable does not
            split (unbalanced quotes).
    """
    raw = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not raw:
        if interactive is None:
            interactive = _stdin_is_terminal()
        if not interactive:
            raise errors.UsageError("edit: no $EDITOR or $VISUAL set and stdin is not a "
                                    "terminal (vi would wait forever): set $EDITOR, e.g. "
                                    "EDITOR=nano monitors edit NAME")
        raw = "vi"
    try:
        argv = shlex.split(raw)
    except ValueError as e:
        raise errors.UsageError(f"$EDITOR {raw!r} does not parse: {e}") from None
    if not argv:
        raise errors.UsageError("$EDITOR is empty")
    return argv


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdin
        return False


@click.command("edit")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True,
              help="Create a shadowing user copy of a built-in without asking.")
@click.pass_context
def command(ctx: click.Context, name: str, yes: bool) -> int:
    """Open monitors.d/NAME.yml in $EDITOR, then lint it (exit 1 on errors)."""
    arguments.check_name(name)
    editor = editor_argv()  # before anything is created: fail at once without one
    settings = settings_of(ctx)
    found = locate.find(settings, name, loaded=load(settings))
    created = False
    if found.user is not None:
        target = found.user
    elif found.system is not None:
        click.echo(f"warning: {name} is a built-in ({shown(settings, found.system)}); system/ "
                   "is pull-only. A user copy will shadow it and will no longer receive "
                   "upstream fixes (to only pause or pin it, use monitors pause/pin).", err=True)
        if not yes:
            try:
                accepted = click.confirm(f"Create monitors.d/{name}.yml and edit it?",
                                         default=False)
            except click.Abort:
                accepted = False
            if not accepted:
                raise errors.UsageError(f"edit {name}: not edited, no user copy created (--yes "
                                        "accepts without a terminal)")
        target = userfiles.copy_builtin(settings, name, found.system,
                                        command=arguments.command_line(["edit", name]))
        created = True
        click.echo(f"created {shown(settings, target)} (shadows {shown(settings, found.system)})")
    else:
        raise errors.NotFoundError(f"no monitor named {name!r}; create one with `monitors add "
                                   f"{name} ...`")
    before = target.read_bytes()
    argv = [*editor, str(target)]
    try:
        rc = subprocess.run(argv, check=False).returncode
    except OSError as e:
        raise errors.UsageError(f"cannot start the editor {argv[0]!r}: {e.strerror}") from None
    if rc != 0:
        raise errors.UsageError(f"the editor exited with status {rc}; "
                                f"{shown(settings, target)} is left as it is")
    if target.read_bytes() == before:
        if created:
            target.unlink()
            click.echo(f"no changes: removed the copy; {name} follows upstream again")
        else:
            click.echo(f"no changes to {shown(settings, target)}")
        return errors.ExitCode.OK

    from reconciler.config import lint

    report = lint.run(settings, [target])
    for problem in report.problems:
        click.echo(problem.format(), err=True)
    if report.errors:
        click.echo(f"{shown(settings, target)} has errors (kept as edited): fix them with "
                   f"`monitors edit {name}`", err=True)
        return errors.ExitCode.ERROR
    click.echo(f"edited {shown(settings, target)}: lint ok")
    return errors.ExitCode.OK
