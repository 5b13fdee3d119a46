"""``source.select``: JMESPath over the JSON of stdout, a line or an HTTP body, through
the real sources (a subprocess, a loopback HTTP server, a stream)."""

from __future__ import annotations

import asyncio
import http.server
import json
from typing import Any

import pytest

from reconciler import errors
from reconciler.conditions import outage
from reconciler.model import Observation
from reconciler.sources import command, http, poll, select
from reconciler.sources.context import SourceContext
from tests.factories import monitor
from tests.helpers import http_server, reply

PR = json.dumps({"state": "OPEN", "checks": [{"name": "lint", "state": "FAILURE"},
                                             {"name": "unit", "state": "SUCCESS"}],
                 "updatedAt": "2026-01-01T10:00:00Z"})


@pytest.mark.parametrize(("expression", "text"), [
    ("state", "OPEN"),
    ("checks[?state=='FAILURE'].name", '[\n  "lint"\n]'),
    ("missing", "null"),
    ("{s: state, n: length(checks)}", '{\n  "n": 2,\n  "s": "OPEN"\n}'),
])
def test_the_selected_value_is_the_text(expression: str, text: str) -> None:
    assert select.apply(expression, PR) == text


@pytest.mark.parametrize(("expression", "document", "message"), [
    ("state", "not json", "not JSON: Expecting value (line 1 column 1)"),
    ("abs(state)", PR, "abs(state): In function abs(), invalid type"),
])
def test_not_json_or_a_failing_expression_is_a_select_error(
        expression: str, document: str, message: str) -> None:
    with pytest.raises(errors.SourceError) as info:
        select.apply(expression, document)
    assert info.value.kind == "select" and str(info.value.args[0]).startswith(message)
    assert outage.stable_kind("select") == "select"


def test_lint_compiles_the_expression() -> None:
    assert select.check({"select": "checks[?state=='FAILURE'].name"}) == []
    [finding] = select.check({"select": "state["})
    assert finding.rule == "bad-select" and finding.path == ("source", "select")
    assert "at column 6" in finding.message


def test_without_select_the_fingerprint_input_has_no_select_key() -> None:
    assert "select" not in monitor().source.to_json()
    assert monitor({"type": "poll", "command": "x", "interval": "1m",
                    "select": "a"}).source.to_json()["select"] == "a"


def _run(coro: Any) -> Any:
    async def go() -> Any:
        ctx = SourceContext.create()
        try:
            return await coro(ctx)
        finally:
            await ctx.aclose()

    return asyncio.run(go())


def test_poll_selects_from_stdout() -> None:
    m = monitor({"type": "poll", "command": ["printf", "%s", PR], "interval": "1m",
                 "select": "checks[?state=='FAILURE'].name | [0]"})
    obs: Observation = _run(lambda ctx: poll.observe(m, ctx))
    assert obs.text == "lint" and obs.meta["exitCode"] == 0


def test_poll_http_selects_from_the_body_and_keeps_the_status_line() -> None:
    def pr(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200, PR.encode(), {"Content-Type": "application/json"})

    def html(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 502, b"<html>bad gateway</html>")

    with http_server({"/pr": pr, "/html": html}) as base:
        m = monitor({"type": "poll-http", "url": base + "/pr", "interval": "1m",
                     "select": "state"})
        assert _run(lambda ctx: http.observe(m, ctx)).text == "200\nOPEN"
        bad = monitor({"type": "poll-http", "url": base + "/html", "interval": "1m",
                       "select": "state"})
        with pytest.raises(errors.SourceError) as info:
            _run(lambda ctx: http.observe(bad, ctx))
        assert info.value.kind == "select"


def test_command_selects_from_each_line() -> None:
    script = 'printf \'{"n": 1}\\nnot json\\n{"n": 2}\\n\'; sleep 30'
    m = monitor({"type": "command", "command": ["sh", "-c", script], "select": "n"})

    async def go(ctx: SourceContext) -> list[str]:
        out: list[str] = []
        stream = command.stream(m, ctx)
        try:
            async for item in stream:
                if isinstance(item, Observation):
                    out.append(item.text)
                elif isinstance(item, errors.SourceError):
                    out.append(str(item).split(":")[0])
                if len(out) == 3:
                    break
        finally:
            await stream.aclose()
        return out

    assert _run(go) == ["1", "select", "2"]
