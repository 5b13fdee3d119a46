"""``monitors audit [--json] [-n N]``: the audit trail (``<state>/audit.jsonl``)."""

from __future__ import annotations

import json

import click


@click.command("audit")
@click.option("-n", "--last", "last", default=50, show_default=True,
              type=click.IntRange(min=0), help="Show the last N records (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as a JSON list.")
@click.pass_context
def command(ctx: click.Context, last: int, as_json: bool) -> int:
    """Show who changed what: every MCP tool call and CLI write command, with its
    caller, arguments (secrets redacted) and outcome."""
    from reconciler.render import terminal
    from reconciler.state import audit

    cfg = ctx.find_root().obj.settings()
    records = audit.read(cfg.state_dir, limit=last or None)
    if as_json:
        click.echo(json.dumps(records, indent=2, ensure_ascii=False))
        return 0
    if not records:
        click.echo("no audit records yet")
    for r in records:
        who = r.get("caller", "?") + (f":{r['client']}" if r.get("client") else "")
        args = json.dumps(r.get("arguments") or {}, ensure_ascii=False, sort_keys=True)
        if len(args) > 120:
            args = args[:117] + "..."
        click.echo(terminal.escape(f"{r.get('at', '?')}  {who:<16} {r.get('tool', '?'):<16} "
                                   f"{r.get('outcome', '?')}  {args}"))
    return 0
