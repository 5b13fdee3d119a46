"""``monitors mcp``: the MCP server over stdio, on the official ``mcp`` SDK's low-level
``Server`` (tools only; the Model Context Protocol, modelcontextprotocol.io).

Each ``tools/call`` is checked against the tool's input schema, run in a worker thread
(an apply may wait for a first poll) and audited in ``<state>/audit.jsonl``
(``state.audit``) with the client's name (``clientInfo.name``). A result is the
tool's compact JSON as ``structuredContent`` plus the same JSON as text; a refusal or
an error is a tool error (``isError``) of one line, never a traceback. Stdout
belongs to the protocol: nothing else is printed there.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from reconciler import __version__, errors
from reconciler.mcpserver import operations, tools
from reconciler.settings import Settings

log = logging.getLogger("monitors.mcp")

INSTRUCTIONS = (
    "Arm and manage the monitors of this repository: watchers that poll a source, "
    "decide with a condition and act. monitor_watch creates one (create-only), "
    "monitor_inspect reads it with its generation, monitor_update replaces it only at "
    "the generation read, monitor_stop ends it with a reason. Every call is audited.")


def outcome_of(exc: BaseException | None) -> str:
    """The audit outcome of a call: ``applied``, ``conflict``, ``refused: <reason>``
    (an error the caller caused) or ``error: <line>``."""
    if exc is None:
        return "applied"
    if isinstance(exc, operations.Conflict):
        return "conflict"
    if isinstance(exc, errors.UsageError | errors.NotFoundError | errors.ConfigError):
        return f"refused: {exc}"
    return f"error: {one_line(exc)}"


def one_line(exc: BaseException) -> str:
    """``exc`` as one line of at most 500 characters (never a traceback)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:500]


def call(settings: Settings, name: str, arguments: Mapping[str, Any], *,
         client: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """Run tool ``name`` and audit it: ``(result, None)`` or ``(None, one-line error)``,
    both with the secrets the configuration references replaced by ``***`` (as the
    daemon's log and HTTP answers are).

    Never raises for what a caller can cause; an unexpected exception is logged (to
    stderr, with its traceback) and answered as one line.
    """
    from reconciler.state import audit

    by = f"mcp:{client or 'unknown'}"
    result: dict[str, Any] | None = None
    failure: BaseException | None = None
    tool = tools.tools().get(name)
    try:
        if tool is None:
            raise errors.UsageError(f"unknown tool {name!r} (known: "
                                    f"{', '.join(tools.tools())})")
        tools.check(tool, arguments)
        result = tool.run(settings, arguments, by)
    except errors.MonitorsError as e:
        failure = e
    except Exception as e:  # a bug: logged with its traceback on stderr, one line out
        log.exception("tool %s failed", name)
        failure = e
    outcome = outcome_of(failure)
    # after the call: a monitor it wrote may name a new secret
    redact = operations.redactor(settings)
    try:
        audit.append(settings.state_dir, audit.entry(
            caller="mcp", client=client, tool=name, arguments=arguments, outcome=outcome,
            redactor=redact))
    except errors.MonitorsError as e:
        log.warning("audit: %s", e)
    if failure is not None:
        if isinstance(failure, operations.Conflict):
            return None, redact.redact(f"conflict: {one_line(failure)}")
        return None, redact.redact(one_line(failure))
    return redact.redact_value(result), None


def _client_name(ctx: Any) -> str | None:
    """``clientInfo.name`` of the connection (None when the client gave none)."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return str(name) if name else None


def build(settings: Settings) -> Any:
    """The SDK ``Server`` with the tools of ``tools.tools()`` bound to ``settings``."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.schema),
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only))
            for t in tools.tools().values()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        client = _client_name(ctx)
        result, error = await anyio.to_thread.run_sync(
            lambda: call(settings, params.name, arguments, client=client))
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=error)],
                                        is_error=True)
        text = json.dumps(result, ensure_ascii=False, default=str)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=json.loads(text))

    return Server("monitors", version=__version__, instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def serve(settings: Settings) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build(settings)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
