"""``monitors mcp``: serve the monitor tools to a coding agent over MCP on stdio
(``mcpserver.server``), on the repository found as every command finds it."""

from __future__ import annotations

import click

from reconciler import errors


@click.command("mcp")
@click.pass_context
def command(ctx: click.Context) -> int:
    """Serve MCP on stdin/stdout (register it with `claude mcp add monitors -- monitors mcp`).

    Tools: monitor_watch, monitor_list, monitor_inspect, monitor_test, monitor_update,
    monitor_stop, monitor_pause, monitor_resume. Every call goes to the audit trail
    (`monitors audit`).
    """
    settings = ctx.find_root().obj.settings()
    try:
        from reconciler.mcpserver import server
    except ModuleNotFoundError as e:
        if e.name not in ("mcp", "mcp_types", "anyio", "pydantic"):
            raise
        raise errors.UsageError("the MCP server needs the mcp SDK: pip install "
                                "'monitors[mcp]'") from None
    server.serve(settings)
    return int(errors.ExitCode.OK)
