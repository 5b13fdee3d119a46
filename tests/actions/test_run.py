"""run and routine: a real fake agent, real process groups, overlap, caps, secrets."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.actions import dispatch
from reconciler.state.store import Store
from tests.actions.conftest import (
    event,
    fire,
    load_json,
    make_dispatcher,
    monitor,
    record,
    write_script,
)
from tests.conftest import processes_with_arg, unique_sleep

HOSTILE = (
    "a $(touch pwned) `touch pwned2`; touch pwned3 && rm -rf x | cat 'single' \"double\"\n"
    "line2\ttab"
)

AGENT = """
import json, os, sys
out = os.environ["RECORD_DIR"]
with open(os.path.join(out, "call-%s.json" % os.environ["MONITORS_EVENT_ID"]), "w") as f:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}, f)
print("hello from agent")
print("token is", os.environ.get("API_TOKEN", ""))
gate = os.environ.get("GATE")
if gate:
    import time
    deadline = time.monotonic() + 20
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def _agent(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "calls"
    calls.mkdir()
    return write_script(tmp_path / "fake-agent", AGENT), calls


def _calls(calls: Path) -> list[dict[str, Any]]:
    return [load_json(p) for p in sorted(calls.glob("call-*.json"))]


def test_hostile_event_reaches_agent_as_one_argv_element(tmp_path: Path, store: Store) -> None:
    script, calls = _agent(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    toml = {"agents": {"fake": {"argv": [str(script), "--print", "{prompt}"]}}}
    mon = monitor(
        {
            "type": "run",
            "agent": "fake",
            "prompt": "Fix: {event}",
            "cwd": str(work),
            "env": {"RECORD_DIR": str(calls), "API_TOKEN": "${SECRET_TOKEN}"},
        }
    )
    ev = event(mon, HOSTILE)
    fire(store, mon, ev)
    environ = {"PATH": os.environ["PATH"], "SECRET_TOKEN": "s3cr3t-value-42"}

    async def go() -> None:
        d = make_dispatcher(store, toml, environ=environ)
        await d.dispatch(mon, ev)
        assert await d.drain(30)
        await d.close()

    asyncio.run(go())
    [call] = _calls(calls)
    assert call["argv"] == ["--print", "Fix: " + HOSTILE]
    assert call["cwd"] == str(work)
    assert call["env"]["API_TOKEN"] == "s3cr3t-value-42"  # the child gets the secret ...
    assert call["env"]["MONITORS_EVENT_ID"] == ev.id
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (work / name).exists() and not (tmp_path / name).exists()
        assert not Path(name).exists()
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded" and rec["exitCode"] == 0 and rec["action"] == "run"
    assert rec["durationSeconds"] >= 0 and rec["output"] == "output.log"
    fdir = store.fire_dir(mon.name, ev.id)
    output = (fdir / "output.log").read_text()
    assert "hello from agent" in output
    assert "s3cr3t-value-42" not in output and "token is ***" in output  # ... records do not
    assert (fdir / "prompt.txt").read_text() == "Fix: " + HOSTILE
    assert "s3cr3t" not in (fdir / "event.json").read_text()


def test_command_form_exit_code_and_failure_reason(tmp_path: Path, store: Store) -> None:
    script, calls = _agent(tmp_path)
    mon = monitor(
        {
            "type": "run",
            "command": [str(script), "{prompt}", "tail"],
            "prompt": "{event}",
            "env": {"RECORD_DIR": str(calls), "EXIT": "3"},
            "cwd": str(tmp_path),
        }
    )
    ev = event(mon, "x")
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})
        await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    assert _calls(calls)[0]["argv"] == ["x", "tail"]
    rec = record(store, mon, ev)
    assert rec["status"] == "failed" and rec["exitCode"] == 3
    assert rec["reason"] == "exit code 3" and "exit code 3" in rec["reasons"]


def test_timeout_kills_the_process_group(tmp_path: Path, store: Store) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = write_script(
        tmp_path / "spawner",
        f"""
import subprocess, sys, time
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pidfile)!r}, "w").write(str(p.pid))
time.sleep(60)
""",
    )
    mon = monitor(
        {
            "type": "run",
            "command": [str(script)],
            "prompt": "",
            "timeout": "1s",
            "cwd": str(tmp_path),
        }
    )
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]}, kill_grace=0.5)
        await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    rec = record(store, mon, ev)
    assert rec["status"] == "failed" and "timed out after 1s" in rec["reason"]
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    alive = True
    while alive and time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
            with open(f"/proc/{grandchild}/stat") as f:  # a zombie is dead too
                alive = f.read().split(") ")[1][0] != "Z"
            time.sleep(0.02)
        except (ProcessLookupError, FileNotFoundError):
            alive = False
    assert not alive, "grandchild survived the timeout"


def _overlap(
    tmp_path: Path, store: Store, overlap: str
) -> tuple[list[Any], list[dict[str, Any]], dispatch.Dispatcher]:
    script, calls = _agent(tmp_path)
    gate = tmp_path / "gate"
    mon = monitor(
        {
            "type": "run",
            "command": [str(script), "{prompt}"],
            "prompt": "{event}",
            "overlap": overlap,
            "cwd": str(tmp_path),
            "env": {"RECORD_DIR": str(calls), "GATE": str(gate)},
        }
    )
    events = [event(mon, f"e{i}") for i in range(3)]
    d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})

    async def go() -> None:
        for ev in events:
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
        # dispatch returned although the first run is still held at the gate
        first = record(store, mon, events[0])
        assert first["status"] in ("pending", "dispatched")
        gate.write_text("go")
        assert await d.drain(30)

    asyncio.run(go())
    return events, [record(store, mon, ev) for ev in events], d


def test_overlap_skip_records_reason(tmp_path: Path, store: Store) -> None:
    events, recs, _ = _overlap(tmp_path, store, "skip")
    assert recs[0]["status"] == "succeeded"
    for rec in recs[1:]:
        assert rec["status"] == "skipped"
        assert rec["reason"] == f"overlap: skip: run {events[0].id} still running"
    assert len(list((tmp_path / "calls").iterdir())) == 1


def test_overlap_queue_runs_in_order(tmp_path: Path, store: Store) -> None:
    events, recs, _ = _overlap(tmp_path, store, "queue")
    assert [r["status"] for r in recs] == ["succeeded"] * 3
    assert recs[1]["queuedBehind"] == events[0].id
    starts = [r["dispatchedAt"] for r in recs]
    assert starts == sorted(starts)
    ends = [r["finishedAt"] for r in recs]
    assert starts[1] >= ends[0] and starts[2] >= ends[1]


def test_overlap_parallel_runs_together(tmp_path: Path, store: Store) -> None:
    _, recs, _ = _overlap(tmp_path, store, "parallel")
    assert [r["status"] for r in recs] == ["succeeded"] * 3
    # all three were started before the gate opened, so each started before any ended
    assert max(r["dispatchedAt"] for r in recs) < min(r["finishedAt"] for r in recs)


def test_output_is_capped(tmp_path: Path, store: Store) -> None:
    script = write_script(tmp_path / "loud", "import sys\nsys.stdout.write('x' * 200000)\n")
    mon = monitor({"type": "run", "command": [str(script)], "prompt": "", "cwd": str(tmp_path)})
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]}, max_output=1000)
        await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    rec = record(store, mon, ev)
    assert rec["status"] == "succeeded"
    assert rec["outputBytes"] == 200000 and rec["outputTruncated"] is True
    out = (store.fire_dir(mon.name, ev.id) / "output.log").read_text()
    assert out.startswith("x" * 1000 + "\n[output truncated") and len(out) < 1200


def test_a_secret_cut_by_the_output_cap_is_masked(tmp_path: Path, store: Store) -> None:
    # the cap (1000 bytes) falls in the middle of the secret: its first half must not stay
    script = write_script(tmp_path / "leaky", "import os, sys\n"
                          "sys.stdout.write('x' * 994 + os.environ['API_TOKEN'] * 2)\n")
    mon = monitor({"type": "run", "command": [str(script)], "prompt": "", "cwd": str(tmp_path)})
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"],
                                            "API_TOKEN": "s3cr3t-value"}, max_output=1000)
        d.redactor.add("s3cr3t-value")  # as the daemon registers it before the first poll
        await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    out = (store.fire_dir(mon.name, ev.id) / "output.log").read_text()
    assert out.startswith("x" * 994 + "***\n[output truncated"), out[990:1040]


def test_routine_uses_the_same_machinery(tmp_path: Path, store: Store) -> None:
    script, calls = _agent(tmp_path)
    toml = {
        "routines": {
            "triage": {
                "argv": [str(script), "triage", "{prompt}"],
                "cwd": str(tmp_path),
                "env": {"RECORD_DIR": str(calls)},
                "timeout": "1m",
            }
        }
    }
    mon = monitor({"type": "routine", "routine": "triage"})
    ev = event(mon, "disk; full")
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, toml, environ={"PATH": os.environ["PATH"]})
        await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    assert _calls(calls)[0]["argv"] == ["triage", "disk; full"]
    rec = record(store, mon, ev)
    assert (
        rec["status"] == "succeeded" and rec["action"] == "routine" and rec["command"] == "triage"
    )


def test_failures_are_recorded_never_raised(tmp_path: Path, store: Store) -> None:
    cases = [
        (
            monitor({"type": "run", "agent": "nobody", "prompt": "x"}, name="a"),
            "unknown agent 'nobody'",
        ),
        (
            monitor({"type": "run", "agent": "claude", "prompt": "{{ nope }}"}, name="b"),
            "template: 'nope' is undefined",
        ),
        (monitor({"type": "routine", "routine": "ghost"}, name="c"), "unknown routine 'ghost'"),
        (
            monitor(
                {"type": "run", "command": ["/no/such/binary"], "prompt": "", "cwd": str(tmp_path)},
                name="d",
            ),
            f"spawn: /no/such/binary: No such file or directory (cwd {tmp_path})",
        ),
        (
            monitor(
                {"type": "run", "command": ["true"], "prompt": "", "cwd": str(tmp_path / "nope")},
                name="e",
            ),
            "is not a directory",
        ),
        (
            monitor(
                {
                    "type": "run",
                    "command": ["true"],
                    "prompt": "",
                    "cwd": str(tmp_path),
                    "env": {"X": "${UNSET_VAR}"},
                },
                name="f",
            ),
            "environment variable UNSET_VAR is not set",
        ),
    ]

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})
        for mon, _ in cases:
            ev = event(mon)
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    for mon, fragment in cases:
        [rec] = store.fires(mon.name)
        assert rec["status"] == "failed", rec
        assert fragment in rec["reason"], rec["reason"]


def test_close_interrupts_a_running_agent(tmp_path: Path, store: Store) -> None:
    script, calls = _agent(tmp_path)
    mon = monitor(
        {
            "type": "run",
            "command": [str(script)],
            "prompt": "",
            "cwd": str(tmp_path),
            "env": {"RECORD_DIR": str(calls), "GATE": str(tmp_path / "never")},
        }
    )
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})
        await d.dispatch(mon, ev)
        deadline = time.monotonic() + 10
        while not list(calls.iterdir()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not await d.drain(0.05)
        await d.close()

    asyncio.run(go())
    rec = record(store, mon, ev)
    assert rec["status"] == "interrupted" and "daemon stopped" in rec["reason"]


def _gone(arg: str, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while processes_with_arg(arg):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _kill_all(arg: str) -> None:
    for leftover in processes_with_arg(arg):
        with contextlib.suppress(ProcessLookupError):
            os.kill(leftover, signal.SIGKILL)


@pytest.mark.parametrize(("tail", "status"), [("", "succeeded"), ("; exit 3", "failed")])
def test_background_child_neither_holds_the_run_nor_outlives_it(
        tmp_path: Path, store: Store, tail: str, status: str) -> None:
    marker = unique_sleep()
    mon = monitor({"type": "run", "command": ["sh", "-c", f"sleep {marker} & echo hi{tail}"],
                   "prompt": "", "cwd": str(tmp_path)})  # overlap: skip (the default)
    first, second = event(mon, "one"), event(mon, "two")

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})
        for ev in (first, second):
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
            assert await d.drain(10), "the run waited for its background child"
        await d.close()

    try:
        asyncio.run(go())
        recs = [record(store, mon, ev) for ev in (first, second)]
        assert [r["status"] for r in recs] == [status, status]  # the second is not skipped
        assert all(r["durationSeconds"] < 5 for r in recs)
        output = (store.fire_dir(mon.name, first.id) / "output.log").read_text()
        assert output.startswith("hi\n")
        assert _gone(marker), "the background child outlived its run"
    finally:
        _kill_all(marker)


def test_close_kills_background_children_of_a_running_action(
        tmp_path: Path, store: Store) -> None:
    marker = unique_sleep()
    mon = monitor({"type": "run", "command": ["sh", "-c", f"sleep {marker} & sleep 60"],
                   "prompt": "", "cwd": str(tmp_path)})
    ev = event(mon)
    fire(store, mon, ev)

    async def go() -> None:
        d = make_dispatcher(store, environ={"PATH": os.environ["PATH"]})
        await d.dispatch(mon, ev)
        deadline = time.monotonic() + 10
        while not processes_with_arg(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await d.close()

    try:
        asyncio.run(go())
        assert record(store, mon, ev)["status"] == "interrupted"
        assert _gone(marker), "the background child outlived the stop"
    finally:
        _kill_all(marker)


def test_default_cwd_is_the_repository_root(tmp_path: Path, store: Store) -> None:
    script, calls = _agent(tmp_path)
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    env = {"RECORD_DIR": str(calls)}
    (root / "agent-home").mkdir()
    toml = {"agents": {"fake": {"argv": [str(script)], "cwd": "agent-home"}}}
    mons = [monitor({"type": "run", "command": [str(script)], "prompt": "", "env": env},
                    name="default"),
            monitor({"type": "run", "command": [str(script)], "prompt": "", "env": env,
                     "cwd": "sub"}, name="relative"),
            monitor({"type": "run", "agent": "fake", "prompt": "", "env": env}, name="agent")]

    async def go() -> None:
        d = make_dispatcher(store, toml, environ={"PATH": os.environ["PATH"]}, root=root)
        for mon in mons:
            ev = event(mon)
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
        assert await d.drain(30)

    asyncio.run(go())
    assert sorted(call["cwd"] for call in _calls(calls)) == [
        str(root), str(root / "agent-home"), str(root / "sub")]
