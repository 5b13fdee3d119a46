"""monitors.toml action sections and argv templates."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import errors
from reconciler.actions import agents, checks, options


def test_defaults_and_overrides() -> None:
    cfg = options.parse({
        "agents": {"claude": {"argv": ["my-claude", "{prompt}"]}, "mine": {"argv": ["x"]}},
        "routines": {"deploy": {"argv": ["make", "deploy"], "timeout": "10m", "overlap": "queue"}},
        "channels": {"phone": {"url": "ntfy://ntfy.sh/topic", "maxAttempts": 5}},
    })
    assert cfg.agents["claude"].argv == ("my-claude", "{prompt}")
    assert cfg.agents["codex"].argv == ("codex", "exec", "{prompt}")
    assert cfg.routines["deploy"].timeout == 600.0 and cfg.routines["deploy"].overlap == "queue"
    assert cfg.channels["log"].url is None and cfg.channels["phone"].max_attempts == 5
    assert cfg.owner_channels == ("log",)


@pytest.mark.parametrize("toml, where", [
    ({"agents": {"a": {"argv": "claude -p"}}}, "agents.a.argv: must be a non-empty list"),
    ({"routines": {"r": {"argv": ["x"], "overlap": "maybe"}}}, "routines.r.overlap: must be"),
    ({"routines": {"r": {"argv": ["x"], "timeout": "soon"}}}, "routines.r.timeout: expected a"),
    ({"channels": {"log": {"url": "json://x"}}}, "channels.log: 'log' is the built-in"),
    ({"channels": {"c": {}}}, "channels.c.url: must be an Apprise URL"),
    ({"owner": {"channels": ["pager"]}}, "owner.channels: unknown channel 'pager'"),
])
def test_errors_name_the_field(toml: dict[str, Any], where: str) -> None:
    with pytest.raises(errors.ConfigError) as e:
        options.parse(toml)
    assert str(e.value).startswith("monitors.toml: ") and where in str(e.value)


def test_argv_templates() -> None:
    assert agents.substitute(["a", "{prompt}", "b", "{prompt}"], "x y") == ["a", "x y", "b", "x y"]
    assert agents.substitute(["--m={prompt}"], "x") == ["--m={prompt}"]
    assert agents.check(["a", "--m={prompt}"]) is not None
    assert agents.check(["a", "{prompt}"]) is None and agents.check([]) == "argv is empty"


def test_expand_and_redact() -> None:
    r = options.Redactor()
    assert options.expand("Bearer ${TOK}", environ={"TOK": "abcdef"}, redactor=r) == "Bearer abcdef"
    assert r.redact("got abcdef twice: abcdef") == "got *** twice: ***"
    with pytest.raises(errors.ActionError, match="NOPE is not set"):
        options.expand("${NOPE}", environ={})


def test_static_checks() -> None:
    cfg = options.parse({"routines": {"deploy": {"argv": ["make"]}}})
    assert checks.problems({"type": "run", "agent": "claude", "prompt": "{event}"}, cfg) == []
    assert checks.problems({"type": "run", "agent": "gpt9", "prompt": "{{ evnt }}"}, cfg) == [
        ("action.prompt", checks.templating.check("{{ evnt }}")),
        ("action.agent", "unknown agent 'gpt9' (known: aider, claude, codex, gemini, opencode)"),
    ]
    assert checks.problems({"type": "run", "command": ["x", "-m{prompt}"], "prompt": ""})[0][0] == (
        "action.command")
    assert checks.problems({"type": "routine", "routine": "nope"}, cfg)[0][0] == "action.routine"
    assert checks.problems({"type": "notify", "channel": "pager"}, cfg)[0][0] == "action.channel"
    assert checks.problems({"type": "notify", "channel": "log"}, cfg) == []
