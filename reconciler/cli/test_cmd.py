"""``monitors test NAME [--json] [--replay FILE | --payload FILE [--event E] | --frame TEXT]``:
evaluate one monitor, act on nothing.

A dry run observes the source once and decides against the stored state
(``daemon.dryrun.dry_run``) and renders the action's template within the
render budgets (``actions.templating``; a template that breaks them, or any
render error, exits 1 with one line); ``--replay`` feeds scripted observations through
the real condition logic from an empty state (``conditions.replay``). A push source
(``webhook``, ``ws``) has nothing to poll: ``--payload FILE [--event E]`` (a webhook
delivery's body) or ``--frame TEXT`` (a ws frame) is what it evaluates instead
(``sources.registry.pushed``). None of them takes an action or writes a byte of state.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from reconciler import errors
from reconciler.daemon.testrun import action_preview, find, summary_line
from reconciler.daemon.testrun import as_json as _as_json
from reconciler.daemon.testrun import dry_run as _dry_run
from reconciler.model import ConditionMode, Monitor
from reconciler.render import terminal

OBSERVATION_LINES = 20
OBSERVATION_CHARS = 2000


def shorten(text: str) -> tuple[str, bool]:
    """At most ``OBSERVATION_LINES`` lines and ``OBSERVATION_CHARS`` characters."""
    lines = text.splitlines()
    short = "\n".join(lines[:OBSERVATION_LINES])
    if len(short) > OBSERVATION_CHARS:
        short = short[:OBSERVATION_CHARS]
    return short, short != text.rstrip("\n")


def pushed_item(monitor: Monitor, data: bytes | None, event: str | None) -> Any:
    """What ``--payload``/``--frame`` push to ``monitor`` (an observation, or the
    ``errors.SourceError`` of a failing ``select``); None without either.

    Raises:
        errors.UsageError: ``monitor`` is not a push source.
    """
    from reconciler.sources import registry as source_types

    if data is None:
        return None
    try:
        return source_types.pushed(monitor, data, event=event)
    except errors.SourceError as e:
        return e


def _text(result: Any, preview: dict[str, Any] | None = None) -> str:
    monitor = result.monitor
    lines = [f"Dry run: {monitor.name}", "", f"  {summary_line(monitor)}", ""]
    obs, d = result.observation, result.decision
    lines.append("Observation")
    short, cut = shorten(obs.text)
    lines += [f"  {line}" for line in (short.splitlines() or ["(empty)"])]
    if cut:
        lines.append(f"  … (shortened; {len(obs.text)} characters, "
                     f"{len(obs.text.splitlines())} lines)")
    meta = json.dumps(dict(obs.meta), ensure_ascii=False, separators=(",", ":"), default=str)
    lines.append(f"  meta: {meta}")
    if monitor.condition.ignore and d.observation != obs.text:
        after, _ = shorten(d.observation)
        lines.append("  after ignore:")
        lines += [f"    {line}" for line in after.splitlines()]
    lines.append("")
    fire = d.fire and not result.paused
    why = str(d.reason) + (f"; auto-paused: {result.paused}" if result.paused else "")
    lines.append(f"Would fire: {'yes' if fire else 'no'} ({why})")
    if result.previous is None:
        lines.append("  stored state: none (this observation would be the baseline)"
                     if monitor.condition.mode is ConditionMode.ON_CHANGE
                     else "  stored state: none")
    else:
        lines.append(f"  stored state: last signature "
                     f"{json.dumps(result.previous.get('lastSignature'), ensure_ascii=False)}")
    lines += ["", "Event" + ("" if fire else " (what a fire would send)")]
    event = result.event
    lines.append(f"  summary: {event.summary}")
    lines.append(f"  signature: {event.signature}")
    if event.groups:
        lines.append(f"  groups: {json.dumps(list(event.groups), ensure_ascii=False)}")
    preview = preview or action_preview(monitor, event)
    lines.append(f"  → {preview['text']}")
    for key in ("prompt", "message"):
        if key in preview:
            lines += [f"    {line}" for line in str(preview[key]).splitlines()]
    if "error" in preview:
        lines.append(f"    error: {preview['error']}")
    lines += ["", "(dry run: no action taken, no state written)"]
    return "\n".join(lines) + "\n"


def _replay(monitor: Monitor, file: Path, as_json: bool) -> int:
    from reconciler.conditions import replay
    from reconciler.config import yamlload
    from reconciler.sources import registry as source_types

    data, problems = yamlload.read(file, file=str(file))  # capped: /dev/zero, a FIFO
    if data is None:
        problem = problems[0]
        kind = errors.UsageError if problem.rule == "unreadable" else errors.ConfigError
        raise kind(f"{file}: {problem.message}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.ConfigError(f"{file}: not UTF-8: {e.reason}") from e
    doc = yamlload.plain(text, file=str(file))
    steps = replay.parse(doc, file=str(file))
    def push(data: bytes, event: str | None) -> Any:
        return source_types.pushed(monitor, data, event=event)

    results = replay.replay(monitor, steps, on_error=source_types.on_error(monitor),
                            push=push if source_types.is_pushed(monitor) else None)
    mismatches = sum(1 for r in results if r.mismatch)
    fires = sum(1 for r in results if r.fire)
    if as_json:
        click.echo(json.dumps({
            "monitor": monitor.name, "file": str(file), "mismatches": mismatches,
            "fires": fires,
            "steps": [{"step": r.step.index, "fire": r.fire, "reason": r.reason,
                       "signature": r.signature, "summary": r.summary,
                       "mismatch": r.mismatch, "completed": r.completed}
                      for r in results],
        }, indent=2, ensure_ascii=False))
    else:
        click.echo(terminal.escape(f"Replay: {monitor.name} ({len(steps)} steps from {file})"))
        for r in results:
            what = (r.step.error if r.step.error is not None
                    else r.step.text if r.step.text is not None
                    else (r.step.pushed or b"").decode("utf-8", "replace"))
            shown = json.dumps(what[:60], ensure_ascii=False)
            mark = "FIRE" if r.fire else "-"
            line = f"  {r.step.index:>3}  {mark:<4}  {r.reason:<21}  {shown}"
            if r.completed:
                line += f"\n       completed ({r.completed}): later steps are not evaluated"
            if r.mismatch:
                line += f"\n       MISMATCH: {r.mismatch}"
            click.echo(terminal.escape(line))
        click.echo(f"{len(steps)} steps, {fires} fire(s), {mismatches} mismatch(es)")
    return int(errors.ExitCode.ERROR) if mismatches else int(errors.ExitCode.OK)


@click.command("test")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--replay", "replay_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Feed the scripted observations in FILE (YAML) through the condition "
              "from an empty state; exit 1 on any expectation mismatch.")
@click.option("--payload", "payload_file", type=click.Path(path_type=Path, dir_okay=False),
              help="webhook: evaluate this delivery body (a JSON file) instead.")
@click.option("--event", help="webhook: the delivery's event name (default: the monitor's "
              "first event), e.g. pull_request.")
@click.option("--frame", help="ws: evaluate this text frame instead.")
@click.pass_context
def command(ctx: click.Context, name: str, as_json: bool, replay_file: Path | None,
            payload_file: Path | None, event: str | None, frame: str | None) -> int:
    """Evaluate one monitor once: the observation, whether it would fire and why,
    and the event and action. Takes no action and writes no state."""
    from reconciler.sources import registry as source_types

    settings = ctx.find_root().obj.settings()
    if sum(x is not None for x in (replay_file, payload_file, frame)) > 1:
        raise errors.UsageError("give at most one of --replay, --payload, --frame")
    if event is not None and payload_file is None:
        raise errors.UsageError("--event goes with --payload FILE")
    monitor, known = find(settings, name)
    if replay_file is not None:
        return _replay(monitor, replay_file, as_json)
    given = "--payload" if payload_file is not None else "--frame" if frame is not None \
        else None
    wanted = source_types.pushed_as(monitor.source_type)
    if given is not None and wanted is not None and given != wanted:
        raise errors.UsageError(f"{name} is a {monitor.source_type} source: use {wanted}")
    data: bytes | None = frame.encode() if frame is not None else None
    if payload_file is not None:
        try:
            data = payload_file.read_bytes()
        except OSError as e:
            raise errors.UsageError(f"--payload {payload_file}: cannot read: "
                                    f"{e.strerror or e}") from e
    result = _dry_run(settings, monitor, known, pushed_item(monitor, data, event))
    # Rendered once (a template may spend its whole budget, templating.RENDER_SECONDS).
    preview = (action_preview(result.monitor, result.event)
               if result.event is not None else None)
    render_error = preview.get("error") if preview else None
    if as_json:
        click.echo(json.dumps(_as_json(result, preview), indent=2, ensure_ascii=False,
                              default=str))
        failed = result.error or render_error
        return int(errors.ExitCode.ERROR) if failed else int(errors.ExitCode.OK)
    if result.error and result.observation is None:
        raise errors.MonitorsError(f"{name}: source check failed: {result.error}")
    click.echo(terminal.escape(_text(result, preview)), nl=False)
    if result.error:  # observed (condition.onError: observe): shown above, still a failure
        raise errors.MonitorsError(f"{name}: source check failed (observed as an error "
                                   f"observation): {result.error}")
    if render_error:
        raise errors.MonitorsError(f"{name}: the action would fail: {render_error}")
    return int(errors.ExitCode.OK)
