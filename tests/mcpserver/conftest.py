"""The MCP server as an agent meets it: ``monitors mcp`` started as a real subprocess on
a temp repository, spoken to by the SDK's own client over stdio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.conftest import Repo
from tests.daemon.conftest import detached  # noqa: F401  (a fixture: stops apply's daemon)

pytest.importorskip("mcp")

CLIENT = "test-agent"


@asynccontextmanager
async def session(repo: Repo) -> AsyncIterator[Any]:
    """An initialized ``mcp.ClientSession`` to ``monitors mcp`` on ``repo``."""
    import mcp_types as types
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reconciler", "--root", str(repo.root), "--state-dir", str(repo.state),
              "--device", "test-box", "mcp"],
        cwd=str(repo.root),
        env={k: v for k, v in os.environ.items() if k.startswith(("MONITORS_", "PATH",
                                                                     "HOME", "XDG_"))})
    info = types.Implementation(name=CLIENT, version="1.0")
    with open(repo.root.parent / "mcp-stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, client_info=info) as s:
            await s.initialize()
            yield s


async def call(s: Any, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """``(ok, result)``: the structured result, or the error text when ``isError``."""
    result = await s.call_tool(tool, arguments)
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if result.is_error:
        return False, text
    return True, result.structured_content or json.loads(text)
