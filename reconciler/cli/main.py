"""The ``monitors`` group: global options, lazy command loading, one error boundary."""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from reconciler import __version__, errors, settings
from reconciler.cli import params
from reconciler.render import terminal

# command name -> module under reconciler.cli (each exposes ``command``).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("init", "Scaffold a monitors repository: example monitor, CI, pre-commit."),
    "lint": ("lint", "Validate monitor and overlay files (CI and pre-commit)."),
    "schema": ("schema", "Print a JSON Schema: monitor, overlay, settings, fleet (editors)."),
    "test": ("test_cmd", "Evaluate one monitor once: observation, would-fire, event."),
    "plan": ("plan", "Show what a reconcile would start, stop, replace and update."),
    "apply": ("apply", "Apply a plan: hand the change to the daemon and wait for first polls."),
    "run": ("run", "Run the reconciler daemon in the foreground."),
    "stop": ("stop", "Stop the daemon of this state directory cleanly."),
    "status": ("status", "Show the daemon's status and revisions; --export writes it for CI."),
    "list": ("list_cmd", "List this device's monitors with owner and liveness."),
    "view": ("view", "Show one monitor: resolved config, fingerprint, liveness, fires."),
    "runs": ("runs", "Show a monitor's fire history."),
    "logs": ("logs", "Show a monitor's action output."),
    "add": ("add", "Write a new monitor file from flags."),
    "remove": ("remove", "Delete a user monitor file."),
    "edit": ("edit", "Open a monitor file in $EDITOR and lint the result."),
    "pause": ("overlay_cmds", "Pause monitors with a generated overlay."),
    "resume": ("overlay_cmds", "Resume a paused monitor (removes the pause overlay)."),
    "pin": ("overlay_cmds", "Pin a monitor to a device with a generated overlay."),
    "unpin": ("overlay_cmds", "Remove a monitor's pin overlay."),
    "layers": ("layers", "Show every built-in and what the user layer does to it."),
    "system": ("system", "Manage the pull-only system layer (pull, status)."),
    "channels": ("channels", "Send a test message through a notify channel."),
    "token": ("token", "Create the bearer token of the daemon's HTTP API."),
    "service": ("service", "Install a systemd unit that runs the daemon."),
    "mcp": ("mcp", "Serve the monitor tools to coding agents over MCP (stdio)."),
    "audit": ("audit", "Show the audit trail of MCP calls and CLI write commands."),
}


class Context:
    """What global options resolve to; commands call ``settings()`` lazily so that
    ``monitors schema`` works outside a repository."""

    def __init__(self, root: Path | None, state_dir: Path | None, device: str | None, *,
                 root_source: str = "--root", device_source: str = "--device") -> None:
        self.root = root
        self.state_dir = state_dir
        self.device = device
        self.root_source = root_source
        self.device_source = device_source
        self._settings: settings.Settings | None = None

    def settings(self) -> settings.Settings:
        """Resolve (once) and return the settings.

        Raises:
            errors.ConfigError: no repository found, or invalid ``monitors.toml``.
        """
        if self._settings is None:
            self._settings = settings.load(
                root=self.root, state_dir=self.state_dir, device=self.device,
                root_source=self.root_source, device_source=self.device_source,
            )
        return self._settings


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use; every command gets
    ``params.CheckedContext`` (text arguments must be valid UTF-8)."""

    context_class = params.CheckedContext

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, help_text = entry
        try:
            module = importlib.import_module(f"reconciler.cli.{module_name}")
        except ModuleNotFoundError as e:
            if e.name != f"reconciler.cli.{module_name}":
                raise
            return _not_yet(cmd_name, help_text)
        command = getattr(module, "commands", {}).get(cmd_name) or module.command
        assert isinstance(command, click.Command)
        from reconciler.cli import auditing

        return auditing.install(params.install(command), cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _not_yet(name: str, help_text: str) -> click.Command:
    def callback(**_: Any) -> int:
        raise errors.UsageError(f"'monitors {name}' is not available in this version yet")

    return click.Command(name, callback=callback, help=help_text + " (not available yet)",
                         context_settings={"ignore_unknown_options": True},
                         params=[click.Argument(["args"], nargs=-1)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), envvar="MONITORS_ROOT",
              help="Repository root [env: MONITORS_ROOT; default: nearest ancestor with "
              "monitors.d/ or monitors.toml].")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False),
              envvar="MONITORS_STATE_DIR",
              help="Per-machine state [env: MONITORS_STATE_DIR; default: <root>/.history].")
@click.option("--device", envvar="MONITORS_DEVICE",
              help="This device's name [env: MONITORS_DEVICE; default: monitors.toml, "
              "then the host name].")
@click.version_option(version=__version__, prog_name="monitors")
@click.pass_context
def main(ctx: click.Context, root: Path | None, state_dir: Path | None, device: str | None) -> None:
    """monitors: keep running watchers equal to what the repository says.

    The GitOps loop: lint -> plan -> apply, and `run` keeps reconciling.
    """
    root_source = _source(ctx, "root", "--root", "MONITORS_ROOT")
    device_source = _source(ctx, "device", "--device", "MONITORS_DEVICE")
    if device is not None:  # given: checked at once, never a silent fallback
        problem = settings.device_problem(device)
        if problem:
            raise errors.UsageError(f"{device_source}: {problem}")
    ctx.obj = Context(root, state_dir, device, root_source=root_source,
                      device_source=device_source)


def _source(ctx: click.Context, param: str, option: str, envvar: str) -> str:
    """``envvar`` when the value of ``param`` came from the environment, else ``option``."""
    if ctx.get_parameter_source(param) is click.core.ParameterSource.ENVIRONMENT:
        return envvar
    return option


GLOBAL_OPTIONS = ("--root", "--state-dir", "--device")
"""Options of the ``monitors`` group itself: they go before the command."""


def _global_option_hint(e: click.NoSuchOption, argv: list[str]) -> str | None:
    """For a global option given after the command (``monitors list --root X``), the
    corrected command line (``monitors --root X list``); None for any other option."""
    if e.option_name not in GLOBAL_OPTIONS:
        return None
    name = e.option_name
    for i, word in enumerate(argv):
        if word == name:
            moved, rest = argv[i:i + 2], argv[:i] + argv[i + 2:]
            break
        if word.startswith(name + "="):
            moved, rest = [word], argv[:i] + argv[i + 1:]
            break
    else:
        return None
    command = e.ctx.command_path.split()[1:] if e.ctx is not None else []
    at = _command_index(rest, command)
    fixed = ["monitors", *rest[:at], *moved, *rest[at:]]
    return f"global options go before the command: {shlex.join(fixed)}"


def _command_index(argv: list[str], command: list[str]) -> int:
    """Index in ``argv`` of the first word of ``command`` (the subcommand path)."""
    if command:
        for i, word in enumerate(argv):
            if argv[i:i + len(command)] == command and not word.startswith("-"):
                return i
    return 0


def entry(argv: list[str] | None = None) -> None:
    """Console-script entry: run ``main`` and exit with a code from ``errors.ExitCode``.

    One error boundary: a ``MonitorsError`` prints one line to stderr; click's
    usage errors print their message and exit 1 (never 2, which means "changes");
    Ctrl-C exits 130; anything else is a bug, printed with its traceback, exit 3.
    """
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code instead of exiting (used by tests)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = main.main(args=args, prog_name="monitors", standalone_mode=False)
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        return errors.ExitCode.INTERRUPTED
    except click.NoSuchOption as e:
        e.show()
        hint = _global_option_hint(e, args)
        if hint:
            click.echo(f"hint: {hint}", err=True)
        return errors.ExitCode.ERROR
    except click.ClickException as e:
        e.show()
        return errors.ExitCode.ERROR
    except errors.MonitorsError as e:
        click.echo(terminal.escape(f"error: {e}"), err=True)
        return e.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return errors.ExitCode.INTERRUPTED
    except BrokenPipeError:
        return errors.ExitCode.OK
    except Exception:
        import traceback  # here: only a bug needs it (~2 ms at start-up)

        click.echo("internal error (a bug in monitors; please report it):", err=True)
        traceback.print_exc()
        return errors.ExitCode.BUG
    if isinstance(rv, int):
        return rv
    return errors.ExitCode.OK
