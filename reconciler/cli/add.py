"""``monitors add NAME``: write ``monitors.d/NAME.yml`` from flags.

One source flag, at most one condition, one action, optional placement and rate
limit. The file is written canonically with the schema modeline, then checked
as ``monitors lint`` checks it, agent/routine/channel names against
``monitors.toml`` included (warnings such as the coverage lint are printed; an
error removes the new file and exits 1).
Refuses a taken name and a behaviour (fingerprint) that already exists in either
layer, naming it, unless ``--force`` (then ``allowDuplicate: true`` is written);
refuses a dead pid for ``--watch-pid`` unless ``--force``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from reconciler import errors
from reconciler import fleet as fleet_mod
from reconciler.actions import registry as actions_registry
from reconciler.cli.overlay_cmds import load, run_apply, settings_of, shown
from reconciler.cli.params import INTEGER
from reconciler.client import create
from reconciler.conditions import registry as condition_registry
from reconciler.config import normalize
from reconciler.config.authoring import adddoc, arguments
from reconciler.planning import placement
from reconciler.sources import registry as source_types


def _action_words(*, optional: bool) -> list[tuple[str, str]]:
    """``(param, flag)`` of the action flags (``actions.registry``) that take a value
    (``optional=False``; ``--prompt`` after the first that takes a prompt) or that may
    go without one (``optional=True``, e.g. ``--notify``)."""
    flags = [kind.ADD for kind in actions_registry.TYPES.values()]
    words = [(flag.dest, flag.flag) for flag in flags if flag.optional_value == optional]
    if not optional:
        first = next(i for i, (param, _) in enumerate(words)
                     if any(f.dest == param and f.takes_prompt for f in flags))
        words.insert(first + 1, ("prompt", "--prompt"))
    return words


def _command_words(params: dict[str, Any]) -> list[str]:
    """The invocation as words, for the generated header (flags in a stable order)."""
    words = ["add", params["name"]]
    flags = [flag for _, flag in source_types.add_flags()]
    for flag in flags:  # a repeatable flag (--on) comes after the others
        value = params.get(flag.dest)
        if not flag.multiple and value is not None and value != ():
            words += [flag.flag, *value] if flag.nargs > 1 else [flag.flag, str(value)]
    conditions = condition_registry.add_flags()
    for key, name in (("interval", "--interval"),
                      *[(f.dest, f.flag) for f in conditions if not f.switch],
                      *_action_words(optional=False),
                      ("device", "--device"), ("devices", "--devices"),
                      ("rate_limit", "--rate-limit"), ("description", "--description"),
                      ("until", "--until"), ("stop_after", "--stop-after"),
                      ("stop_when", "--stop-when")):
        if params.get(key) is not None:
            words += [name, str(params[key])]
    for flag in flags:
        if flag.multiple:
            for item in params.get(flag.dest) or ():
                words += [flag.flag, item]
    for item in params.get("labels") or ():
        words += ["--label", item]
    for key, name in _action_words(optional=True):
        if params.get(key) is not None:
            words += [name, params[key]] if params[key] else [name]
    for key, name in (*[(f.dest, f.flag) for f in conditions if f.switch], ("force", "--force")):
        if params.get(key):
            words.append(name)
    return words


def _source_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """One click option per source type's ``add`` flag (``sources.registry``), in order."""
    for _, flag in reversed(source_types.add_flags()):
        f = click.option(flag.flag, nargs=flag.nargs, multiple=flag.multiple,
                         type=INTEGER if flag.integer else None, metavar=flag.metavar,
                         help=flag.help)(f)
    return f


def _condition_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """One click option per condition ``add`` flag (``conditions.registry``), in order."""
    for flag in reversed(condition_registry.add_flags()):
        f = (click.option(flag.flag, is_flag=True, help=flag.help) if flag.switch
             else click.option(flag.flag, metavar=flag.metavar, help=flag.help))(f)
    return f


def _action_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The action flags, one per action type (``actions.registry``: each module's
    ``ADD``), with ``--prompt`` after the first flag that takes a prompt."""
    flags = [kind.ADD for kind in actions_registry.TYPES.values()]
    first = next(i for i, flag in enumerate(flags) if flag.takes_prompt)
    with_prompt = " or ".join(flag.flag for flag in flags if flag.takes_prompt)
    options = [click.option(flag.flag, is_flag=False, flag_value="", default=None,
                            metavar=flag.metavar, help=flag.help) if flag.optional_value
               else click.option(flag.flag, metavar=flag.metavar, help=flag.help)
               for flag in flags]
    options.insert(first + 1, click.option("--prompt", metavar="TEXT",
                                           help=f"The prompt for {with_prompt}."))
    for option in reversed(options):
        f = option(f)
    return f


@click.command("add")
@click.argument("name")
@_source_options
@click.option("--interval", metavar="DURATION",
              help="Check interval for --watch-pid, --watch-file, --watch-device.")
@_condition_options
@_action_options
@click.option("--device", metavar="D", help="The owner: only device D runs it.")
@click.option("--devices", metavar="A,B", help="An allowlist: each listed device runs it.")
@click.option("--rate-limit", metavar="MAX/PER", help="Auto-pause past MAX fires per PER (5/1m).")
@click.option("--description", metavar="TEXT", help="What it is for.")
@click.option("--until", metavar="WHEN",
              help="Complete (stop) at this date-time, or this long after the first start.")
@click.option("--stop-after", type=int, metavar="N", help="Complete after N fires.")
@click.option("--stop-when", metavar="RE",
              help="Complete when an observation matches RE (merged|closed).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="A label for selection (pause -l KEY=VALUE); repeatable.")
@click.option("--force", is_flag=True,
              help="Add a deliberate duplicate (writes allowDuplicate: true), shadow a built-in "
              "of the same name, or arm --watch-pid on a pid not alive yet.")
@click.option("--apply", "apply", is_flag=True, help="Apply at once and report the first poll.")
@click.pass_context
def command(ctx: click.Context, /, **params: Any) -> int:
    """Write a new monitor file monitors.d/NAME.yml from flags, then lint it."""
    settings = settings_of(ctx)
    req = adddoc.AddRequest(
        name=params["name"],
        sources={kind: tuple(v) if flag.multiple or flag.nargs > 1 else v
                 for kind, flag in source_types.add_flags()
                 if (v := params[flag.dest]) is not None and v != ()},
        conditions={flag.dest: params[flag.dest] for flag in condition_registry.add_flags()},
        prompt=params["prompt"], device=params["device"],
        devices=arguments.split_devices(params["devices"]) if params["devices"] else (),
        rate_limit=params["rate_limit"], interval=params["interval"],
        description=params["description"], labels=tuple(params["labels"]),
        force=params["force"], until=params["until"], stop_after=params["stop_after"],
        stop_when=params["stop_when"],
        **{kind.ADD.dest: params[kind.ADD.dest] for kind in actions_registry.TYPES.values()},
    )
    doc = adddoc.build_doc(req)
    monitor = normalize.monitor(doc, name=req.name)
    checked = create.check_new(settings, monitor, loaded=load(settings), force=req.force)
    if checked.duplicate:
        doc["allowDuplicate"] = True
    try:
        written = create.write(settings, req.name, doc,
                               command=arguments.command_line(_command_words(params)))
    except create.NotLinted as e:
        for problem in e.problems:
            click.echo(problem.format(), err=True)
        raise errors.ConfigError(f"add: {req.name} does not pass lint (see above); "
                                 "nothing written") from None
    for problem in written.problems:
        click.echo(problem.format(), err=True)
    fleet = fleet_mod.load(settings.fleet_file)
    decision = placement.owner_decision(written.monitor, device=settings.device, fleet=fleet)
    click.echo(f"added {req.name}: {shown(settings, written.path)} ({decision.reason})")
    if checked.behaviour:
        click.echo("note: declared a deliberate duplicate of "
                   + ", ".join(m.split(" (")[0] for m in checked.behaviour), err=True)
    if checked.system is not None:
        click.echo(f"note: shadows the built-in {shown(settings, checked.system)}, which no "
                   "longer receives upstream fixes here", err=True)
    peer_check = checked.peers
    if peer_check.found:
        click.echo("note: declared a deliberate duplicate of " + ", ".join(
            f"{name!r} on {device}" for device, name in peer_check.found), err=True)
    if peer_check.unreachable:
        click.echo("note: duplicate check could not consult " + "; ".join(
            f"{device} ({error})" for device, error in peer_check.unreachable.items()),
            err=True)
    if params["apply"]:
        return run_apply(ctx)
    return errors.ExitCode.OK
