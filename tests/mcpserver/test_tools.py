"""The MCP tools end to end: the SDK's client over stdio against ``monitors mcp`` on a
temp repository, with the daemon started for real (by the first watch, as
``add --apply`` starts it)."""

from __future__ import annotations

from typing import Any

import anyio
import yaml

from reconciler.state import audit
from tests.conftest import Repo
from tests.mcpserver.conftest import CLIENT, call, session


def source(command: str) -> dict[str, Any]:
    return {"type": "poll", "command": ["sh", "-c", command], "interval": "1s"}


NOTIFY = {"type": "notify"}


def test_watch_starts_the_daemon_and_reports_the_first_poll(detached: Repo) -> None:
    repo = detached

    async def scenario() -> None:
        async with session(repo) as s:
            tools = {t.name for t in (await s.list_tools()).tools}
            assert {"monitor_watch", "monitor_list", "monitor_inspect", "monitor_test",
                    "monitor_update", "monitor_stop", "monitor_pause",
                    "monitor_resume"} <= tools
            ok, got = await call(s, "monitor_watch", name="head", source=source("echo one"),
                                 action=NOTIFY, labels={"work-item": "pr-1"})
            assert ok, got
            assert got["name"] == "head" and got["generation"].startswith("g-")
            assert got["firstPoll"]["status"] == "ok", got
            assert got["startedDaemon"]  # the daemon was down: the watch started it
            assert got["liveness"]["status"] == "running"
            written = yaml.safe_load((repo.user / "head.yml").read_text())
            assert written["source"]["command"] == ["sh", "-c", "echo one"]

            ok, listed = await call(s, "monitor_list")
            assert ok and [m["generation"] for m in listed["monitors"]
                           if m["name"] == "head"] == [got["generation"]]

    anyio.run(scenario)
    watched, listed = audit.read(repo.state)  # every call, reads too
    assert watched["caller"] == "mcp" and watched["client"] == CLIENT
    assert watched["tool"] == "monitor_watch" and watched["outcome"] == "applied"
    assert watched["arguments"]["labels"] == {"work-item": "pr-1"}
    assert listed["tool"] == "monitor_list" and listed["outcome"] == "applied"
    assert (repo.state / "audit.jsonl").stat().st_mode & 0o777 == 0o600
