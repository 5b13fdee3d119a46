"""The MCP tools end to end: the SDK's client over stdio against ``monitors mcp`` on a
temp repository, with the daemon started for real (by the first watch, as
``add --apply`` starts it)."""

from __future__ import annotations

from typing import Any

import anyio
import yaml

from reconciler.state import audit
from tests.conftest import Repo, run_cli
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
            ok, tested = await call(s, "monitor_test", name="head")
            assert ok and tested["observation"]["text"].strip() == "one", tested
            assert tested["wouldFire"] is False  # the first poll took the baseline

    anyio.run(scenario)
    watched, listed, _ = audit.read(repo.state)  # every call, reads too
    assert watched["caller"] == "mcp" and watched["client"] == CLIENT
    assert watched["tool"] == "monitor_watch" and watched["outcome"] == "applied"
    assert watched["arguments"]["labels"] == {"work-item": "pr-1"}
    assert listed["tool"] == "monitor_list" and listed["outcome"] == "applied"
    assert (repo.state / "audit.jsonl").stat().st_mode & 0o777 == 0o600


def test_duplicate_behaviour_under_another_name_is_refused_naming_it(detached: Repo) -> None:
    repo = detached

    async def scenario() -> None:
        async with session(repo) as s:
            ok, got = await call(s, "monitor_watch", name="first", source=source("echo x"),
                                 action=NOTIFY, wait=0)
            assert ok, got
            ok, again = await call(s, "monitor_watch", name="first", source=source("echo y"),
                                   action=NOTIFY, wait=0)
            assert not ok and "a monitor named 'first' already exists" in again
            ok, dup = await call(s, "monitor_watch", name="second", source=source("echo x"),
                                 action=NOTIFY, wait=0)
            assert not ok
            assert "same behaviour already exists" in dup and "'first'" in dup, dup
            assert "\n" not in dup

    anyio.run(scenario)
    assert not (repo.user / "second.yml").exists()
    outcomes = [r["outcome"] for r in audit.read(repo.state)]
    assert outcomes[0] == "applied"
    assert outcomes[1].startswith("refused: a monitor named 'first'")
    assert outcomes[2].startswith("refused: same behaviour already exists")


def test_two_updates_at_one_generation_one_applies_one_conflicts(detached: Repo) -> None:
    repo = detached
    results: list[tuple[bool, Any]] = []

    async def scenario() -> None:
        async with session(repo) as s:
            ok, got = await call(s, "monitor_watch", name="head", source=source("echo one"),
                                 action=NOTIFY, wait=0)
            assert ok, got
            ok, seen = await call(s, "monitor_inspect", name="head")
            assert ok and seen["generation"] == got["generation"]

            async def update(text: str) -> None:
                results.append(await call(s, "monitor_update", name="head",
                                          generation=seen["generation"],
                                          source=source(text), action=NOTIFY, wait=0))

            async with anyio.create_task_group() as tg:
                tg.start_soon(update, "echo two")
                tg.start_soon(update, "echo three")
            ok, now = await call(s, "monitor_inspect", name="head")
            assert ok
            [(_, applied)] = [r for r in results if r[0]]
            [(_, conflict)] = [r for r in results if not r[0]]
            assert now["generation"] == applied["generation"] != seen["generation"]
            assert conflict.startswith("conflict: ") and now["generation"] in conflict
            command = now["config"]["source"]["command"][-1]
            assert command in ("echo two", "echo three")

    anyio.run(scenario)
    outcomes = sorted(r["outcome"] for r in audit.read(repo.state)
                      if r["tool"] == "monitor_update")
    assert outcomes == ["applied", "conflict"]


def test_stop_keeps_its_reason_for_inspect_view_and_the_audit(detached: Repo) -> None:
    repo = detached
    repo.write("system/builtin-check.yml", yaml.safe_dump(
        {"name": "builtin-check", "source": source("echo builtin"), "action": NOTIFY}))

    async def scenario() -> None:
        async with session(repo) as s:
            ok, got = await call(s, "monitor_watch", name="pr-7", source=source("echo open"),
                                 action=NOTIFY, wait=0)
            assert ok, got
            ok, stopped = await call(s, "monitor_stop", name="pr-7", reason="PR merged")
            assert ok and stopped["action"] == "removed", stopped
            ok, seen = await call(s, "monitor_inspect", name="pr-7")
            assert ok and seen["status"] == "stopped", seen
            assert seen["stopped"]["reason"] == "PR merged"
            assert seen["stopped"]["by"] == f"mcp:{CLIENT}"

            ok, paused = await call(s, "monitor_stop", name="builtin-check",
                                    reason="not on this box")
            assert ok and paused["action"] == "paused", paused
            ok, seen = await call(s, "monitor_inspect", name="builtin-check")
            assert ok and seen["status"] == "paused"
            assert seen["stopped"]["reason"] == "not on this box"
            view = run_cli(["view", "builtin-check"], repo=repo)
            assert "stopped:     not on this box" in view.stdout, view.output
            assert not (repo.user / "pr-7.yml").exists()
            gone = run_cli(["view", "pr-7"], repo=repo)
            assert gone.exit_code == 1 and "pr-7 was stopped" in gone.stderr
            assert "PR merged" in gone.stderr

            ok, again = await call(s, "monitor_watch", name="pr-7",
                                   source=source("echo reopened"), action=NOTIFY, wait=0)
            assert ok, again
            ok, seen = await call(s, "monitor_inspect", name="pr-7")
            assert ok and seen["stopped"] is None  # armed again: the old stop is over

    anyio.run(scenario)
    assert (repo.system / "builtin-check.yml").exists()  # a built-in is never removed
    [stop] = [r for r in audit.read(repo.state)
              if r["tool"] == "monitor_stop" and r["arguments"]["name"] == "pr-7"]
    assert stop["arguments"]["reason"] == "PR merged" and stop["outcome"] == "applied"


def test_bad_arguments_are_one_line_tool_errors(repo: Repo) -> None:
    async def scenario() -> None:
        async with session(repo) as s:
            for tool, args, expected in (
                    ("monitor_watch", {"name": "Bad Name", "source": source("true"),
                                       "action": NOTIFY}, "name: 'Bad Name' does not match"),
                    ("monitor_watch", {"name": "x", "action": NOTIFY},
                     "'source' is a required property"),
                    ("monitor_watch", {"name": "x", "source": {"type": "nope"},
                                       "action": NOTIFY}, "source"),
                    ("monitor_update", {"name": "x", "generation": "7",
                                        "source": source("true"), "action": NOTIFY},
                     "generation"),
                    ("monitor_inspect", {"name": "ghost"}, "no monitor named 'ghost'"),
                    ("monitor_stop", {"name": "ghost"}, "'reason' is a required property"),
                    ("monitor_pause", {"name": "ghost", "extra": 1}, "extra"),
                    ("monitor_nope", {}, "unknown tool 'monitor_nope'")):
                ok, text = await call(s, tool, **args)
                assert not ok, (tool, args)
                assert "\n" not in text and "Traceback" not in text, text
                assert expected in text, (tool, text)

    anyio.run(scenario)
    assert all(r["outcome"].startswith("refused: ") for r in audit.read(repo.state))


def test_inspect_shows_fires_and_pause_and_resume_use_overlays(detached: Repo) -> None:
    repo = detached

    async def scenario() -> None:
        async with session(repo) as s:
            ok, got = await call(s, "monitor_watch", name="head", source=source("echo one"),
                                 condition={"mode": "every"}, action=NOTIFY, wait=0)
            assert ok, got
            with anyio.fail_after(20):  # every poll fires: inspect shows the fires
                while True:
                    ok, seen = await call(s, "monitor_inspect", name="head", fires=3)
                    if ok and seen["recentFires"]:
                        break
                    await anyio.sleep(0.2)
            fire = seen["recentFires"][0]
            assert fire["id"] and fire["status"] and fire["why"], fire
            assert seen["liveness"]["fireCount"] >= 1
            ok, paused = await call(s, "monitor_pause", name="head", reason="deploy freeze",
                                    until="2h")
            assert ok and paused["reason"] == "deploy freeze" and paused["until"], paused
            ok, seen = await call(s, "monitor_inspect", name="head")
            assert ok and seen["status"] == "paused" and "deploy freeze" in seen["reason"]
            assert seen["generation"] == got["generation"]  # an overlay is not the file
            ok, resumed = await call(s, "monitor_resume", name="head")
            assert ok and resumed["pauseRemoved"], resumed
            ok, seen = await call(s, "monitor_inspect", name="head")
            assert ok and seen["status"] == "running", seen

    anyio.run(scenario)
    assert not (repo.overlays / "head.yml").exists()
