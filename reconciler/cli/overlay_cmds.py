"""``monitors pause | resume | pin | unpin``: generated overlays, never edits.

Each writes or removes ``monitors.d/overlays/NAME.yml`` (one file per monitor,
a header naming the command) through ``config.writer``; an overlay left empty is
deleted. ``--commit`` commits the overlay files with GitPython and a generated
message; ``--apply`` hands the change to the daemon at once (``cli.apply``).
``resume`` also clears a rate-limit auto-pause in the running state.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from reconciler import errors
from reconciler.config import gitworktree, writer
from reconciler.config.authoring import arguments, overlayedit
from reconciler.settings import Settings

APPLY_WAIT = 30.0
"""Seconds ``--apply`` waits for the daemon (first polls of started monitors)."""


# -- helpers shared with add/remove/edit ------------------------------------------------------


def settings_of(ctx: click.Context) -> Settings:
    """The invocation's settings (``main.Context.settings``)."""
    found: Settings = ctx.find_root().obj.settings()
    return found


def load(settings: Settings) -> Any:
    """``loader.load(settings)``: the resolved layers (a ``LoadResult``)."""
    from reconciler.config import loader

    return loader.load(settings)


def shown(settings: Settings, path: Path | None) -> str:
    """``path`` relative to the repository root when below it."""
    if path is None:
        return "-"
    from reconciler.config import files

    try:  # the parent only: the file itself may be a symlink loop (resolve() raises)
        resolved = Path(path).parent.resolve() / Path(path).name
        return files.printable_name(str(resolved.relative_to(settings.root)))
    except ValueError:
        return files.printable_name(str(path))


def run_apply(ctx: click.Context, *, wait: float = APPLY_WAIT) -> int:
    """Apply at once through ``cli.apply.apply_now(ctx_obj, wait=...)`` (``wait``:
    seconds for the first polls of started monitors); returns its exit code."""
    from reconciler.cli import apply as apply_mod  # lazy: only --apply needs it

    return int(apply_mod.apply_now(ctx.find_root().obj, wait=wait))


def commit_paths(settings: Settings, paths: Sequence[Path], message: str) -> None:
    """``--commit``: commit exactly ``paths`` and say so (or that nothing changed)."""
    sha = gitworktree.commit(settings, paths, message)
    if sha is None:
        click.echo("nothing to commit")
    else:
        click.echo(f"committed {sha[:12]}: {message}")


def finish(ctx: click.Context, settings: Settings, paths: Sequence[Path], *, message: str,
           commit: bool, apply: bool) -> int:
    """Commit and/or apply after a write; returns the exit code."""
    if commit:
        commit_paths(settings, paths, message)
    if apply:
        return run_apply(ctx)
    return errors.ExitCode.OK


def _emit(as_json: bool, rows: list[dict[str, Any]], lines: list[str]) -> None:
    if as_json:
        click.echo(json.dumps({"monitors": rows}, indent=2))
    else:
        for line in lines:
            click.echo(line)


def _words(name: str | None, labels: Sequence[str]) -> list[str]:
    if name:
        return [name]
    out: list[str] = []
    for item in labels:
        out += ["-l", item]
    return out


def _targets(ctx: click.Context, name: str | None, labels: Sequence[str]
             ) -> tuple[Settings, Any, list[str]]:
    """``(settings, loaded layers, target names)`` of a NAME or ``-l KEY=VALUE`` command.

    Raises:
        errors.UsageError: both or neither of NAME and ``-l`` given.
        errors.NotFoundError: no monitor called NAME, or none matches the labels.
    """
    settings = settings_of(ctx)
    loaded = load(settings)
    names = overlayedit.targets(settings, name=name, labels=labels, loaded=loaded)
    return settings, loaded, names


def _subject(names: Sequence[str], labels: Sequence[str]) -> str:
    if len(names) == 1 and not labels:
        return names[0]
    return f"{len(names)} monitors ({', '.join(labels)}): {', '.join(names)}"


def _clear_autopause(settings: Settings, store: Any, name: str) -> None:
    """Clear a rate-limit auto-pause: through a running daemon (its guard holds it in
    memory too), and in the state directory either way."""
    from reconciler.client import control as client

    if client.status(settings.state_dir) is not None:
        try:
            client.clear_autopause(settings.state_dir, name)
        except errors.MonitorsError as e:
            click.echo(f"warning: the running daemon did not clear {name}'s auto-pause: {e}",
                       err=True)
    store.clear_autopause(name)


_name_arg = click.argument("name", required=False)
_label_opt = click.option("-l", "--label", "labels", multiple=True, metavar="KEY=VALUE",
                          help="Act on every monitor whose labels match (repeatable: all must).")
_commit_opt = click.option("--commit", is_flag=True,
                           help="Commit the overlay file(s) with a generated message.")
_apply_opt = click.option("--apply", "apply", is_flag=True, help="Apply the change at once.")
_json_opt = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


# -- pause -------------------------------------------------------------------------------------


@click.command("pause")
@_name_arg
@_label_opt
@click.option("--until", metavar="2h|ISO-TIME|never",
              help="Expiry: a duration from now (2h, 1d) or an ISO time (stored as UTC); "
              "'never' clears the expiry of an existing pause. Omitted: an existing "
              "pause keeps its expiry.")
@click.option("--reason", default=None,
              help="Why (recorded in the overlay). Omitted: an existing pause keeps its "
              "reason; --reason '' clears it.")
@_commit_opt
@_apply_opt
@_json_opt
@click.pass_context
def pause(ctx: click.Context, name: str | None, labels: tuple[str, ...], until: str | None,
          reason: str | None, commit: bool, apply: bool, as_json: bool) -> int:
    """Pause NAME (or every monitor matching -l KEY=VALUE) with a generated overlay.

    Writes monitors.d/overlays/NAME.yml; the monitor file (and system/) is never
    edited, so a paused built-in keeps receiving upstream fixes. The pause records
    its reason, its author (git config) and when it was made.

    Pausing again keeps the existing --until and --reason unless given again
    (a temporary pause never silently becomes permanent); `--until never` makes
    it last until `monitors resume`.
    """
    settings, _, names = _targets(ctx, name, labels)
    expiry = overlayedit.until_arg(until)
    words = ["pause", *_words(name, labels)]
    if until is not None:
        words += ["--until", until]
    if reason is not None:
        words += ["--reason", reason]
    done = overlayedit.pause(settings, names, reason=reason, until=expiry,
                             author=gitworktree.author(settings),
                             command=arguments.command_line(words))
    lines = []
    for d in done:
        tail = (f" until {d.pause.until}" if d.pause.until else "") + (
            f" ({d.pause.reason})" if d.pause.reason else "")
        lines.append(f"paused {d.name}{tail}: {shown(settings, d.path)}")
        if d.kept:
            parts = ([f"expiry (until {d.pause.until})"] if "until" in d.kept else []) + (
                [f"reason ({d.pause.reason})"] if "reason" in d.kept else [])
            hint = " (--until never clears the expiry)" if "until" in d.kept else ""
            lines.append(f"{d.name}: already paused: kept its {' and '.join(parts)}, "
                         f"not given again{hint}")
        if "until" in d.cleared:
            lines.append(f"{d.name}: expiry cleared: paused until `monitors resume {d.name}`")
        if d.expired:
            lines.append(f"{d.name}: the previous pause expired at {d.expired}; "
                         "replaced by this one")
    if labels:
        lines.append(f"paused {len(names)} monitor{'s' if len(names) != 1 else ''} matching "
                     f"{', '.join(labels)}: {', '.join(names)}")
    _emit(as_json, [{"monitor": d.name, "overlay": str(d.path), "paused": True,
                     "until": d.pause.until, "reason": d.pause.reason, "kept": list(d.kept),
                     "cleared": list(d.cleared)} for d in done], lines)
    message = f"monitors: pause {_subject(names, labels)}" + (f": {reason}" if reason else "")
    return finish(ctx, settings, [d.path for d in done], message=message, commit=commit,
                  apply=apply)


# -- resume ------------------------------------------------------------------------------------


@click.command("resume")
@_name_arg
@_label_opt
@_commit_opt
@_apply_opt
@_json_opt
@click.pass_context
def resume(ctx: click.Context, name: str | None, labels: tuple[str, ...], commit: bool,
           apply: bool, as_json: bool) -> int:
    """Resume NAME: remove the overlay's pause (deleting an overlay left empty) and
    clear a rate-limit auto-pause in the running state."""
    from reconciler.state import store as store_mod

    settings, loaded, names = _targets(ctx, name, labels)
    command = arguments.command_line(["resume", *_words(name, labels)])
    store = store_mod.Store(settings.state_dir)
    rows, lines, paths = [], [], []
    for n in names:
        had_pause = isinstance(overlayedit.current_overlay(settings, n).get("pause"), dict)
        path = writer.overlay_path(settings, n)
        kept = None
        if had_pause:
            kept = writer.write_overlay(settings, n, pause=None, command=command)
            paths.append(path)
        auto = store.autopause(n)
        if auto:
            _clear_autopause(settings, store, n)
        if had_pause and store.monitor_dir(n).is_dir():
            store.clear_stopped(n)  # a built-in that monitor_stop paused runs again
        what = []
        if had_pause:
            what.append(f"removed {shown(settings, path)}" if kept is None
                        else f"kept the pin in {shown(settings, path)}")
        if auto:
            what.append("cleared the rate-limit auto-pause")
        monitor = loaded.monitors.get(n)
        if not what:
            lines.append(f"{n} is not paused")
        else:
            lines.append(f"resumed {n}: {'; '.join(what)}")
        if monitor is not None and not monitor.enabled:
            lines.append(f"note: {n} says enabled: false in {shown(settings, monitor.origin)}; "
                         "it stays off until that file changes")
        rows.append({"monitor": n, "overlay": str(kept) if kept else None,
                     "resumed": bool(what), "autopauseCleared": bool(auto)})
    _emit(as_json, rows, lines)
    message = f"monitors: resume {_subject(names, labels)}"
    return finish(ctx, settings, paths, message=message, commit=commit and bool(paths),
                  apply=apply)


# -- pin / unpin -------------------------------------------------------------------------------


@click.command("pin")
@_name_arg
@_label_opt
@click.option("--device", "pin_device", metavar="D", help="The owner: only D runs it.")
@click.option("--devices", "pin_devices", metavar="A,B",
              help="An allowlist: each listed device runs it.")
@_commit_opt
@_apply_opt
@_json_opt
@click.pass_context
def pin(ctx: click.Context, name: str | None, labels: tuple[str, ...], pin_device: str | None,
        pin_devices: str | None, commit: bool, apply: bool, as_json: bool) -> int:
    """Pin NAME to a device (--device D) or an allowlist (--devices A,B) with a
    generated overlay that replaces the monitor's own placement."""
    from reconciler import fleet as fleet_mod

    if bool(pin_device) == bool(pin_devices):
        raise errors.UsageError("pin: give --device D or --devices A,B (one of them)")
    if pin_device:
        arguments.check_device(pin_device)
        spec: dict[str, Any] = {"device": pin_device}
        listed: tuple[str, ...] = (pin_device,)
        flag = ["--device", pin_device]
    else:
        listed = arguments.split_devices(pin_devices or "")
        spec = {"devices": list(listed)}
        flag = ["--devices", ",".join(listed)]
    settings, _, names = _targets(ctx, name, labels)
    command = arguments.command_line(["pin", *_words(name, labels), *flag])
    fleet = fleet_mod.load(settings.fleet_file)
    paths = [p for n in names
             if (p := writer.write_overlay(settings, n, pin=spec, command=command)) is not None]
    where = f"device {listed[0]}" if pin_device else f"devices {', '.join(listed)}"
    lines = [f"pinned {n} to {where}: {shown(settings, p)}"
             for n, p in zip(names, paths, strict=True)]
    _emit(as_json, [{"monitor": n, "overlay": str(p), "pin": spec}
                    for n, p in zip(names, paths, strict=True)], lines)
    fleet_shown = shown(settings, settings.fleet_file)
    for d in listed:
        if fleet.exists and fleet.get(d) is None:
            click.echo(f"warning: {d} is not a device of {fleet_shown}", err=True)
    message = f"monitors: pin {_subject(names, labels)} to {', '.join(listed)}"
    return finish(ctx, settings, paths, message=message, commit=commit, apply=apply)


@click.command("unpin")
@_name_arg
@_label_opt
@_commit_opt
@_apply_opt
@_json_opt
@click.pass_context
def unpin(ctx: click.Context, name: str | None, labels: tuple[str, ...], commit: bool,
          apply: bool, as_json: bool) -> int:
    """Remove NAME's pin overlay (deleting an overlay left empty); the monitor's own
    placement applies again."""
    settings, loaded, names = _targets(ctx, name, labels)
    command = arguments.command_line(["unpin", *_words(name, labels)])
    rows, lines, paths = [], [], []
    for n in names:
        path = writer.overlay_path(settings, n)
        current = overlayedit.current_overlay(settings, n)
        if not isinstance(current.get("pin"), dict):
            line = f"{n} has no pin overlay"
            monitor = loaded.monitors.get(n)
            if monitor is not None and (monitor.device or monitor.devices):
                line += (f"; its placement comes from {shown(settings, monitor.origin)}: "
                         "edit it there")
            lines.append(line)
            rows.append({"monitor": n, "overlay": None, "unpinned": False})
            continue
        kept = writer.write_overlay(settings, n, pin=None, command=command)
        paths.append(path)
        lines.append(f"unpinned {n}: " + (f"removed {shown(settings, path)}" if kept is None
                                          else f"kept the pause in {shown(settings, path)}"))
        rows.append({"monitor": n, "overlay": str(kept) if kept else None, "unpinned": True})
    _emit(as_json, rows, lines)
    message = f"monitors: unpin {_subject(names, labels)}"
    return finish(ctx, settings, paths, message=message, commit=commit and bool(paths),
                  apply=apply)


commands: dict[str, click.Command] = {"pause": pause, "resume": resume, "pin": pin,
                                      "unpin": unpin}
