"""A crash between the pending record and dispatch, per action type (and mid-delivery)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

from reconciler.actions import recovery
from reconciler.state.store import Store
from tests.actions.conftest import (
    Receiver,
    event,
    fire,
    make_dispatcher,
    monitor,
    notifications,
    record,
    write_script,
)


def _restart(store_dir: Path, monitors: dict[str, Any], toml: dict[str, Any] | None = None,
             ) -> list[recovery.Recovered]:
    async def go() -> list[recovery.Recovered]:
        store = Store(store_dir)
        d = make_dispatcher(store, toml, environ={"PATH": os.environ["PATH"]})
        out = await recovery.recover(store, monitors, d)
        assert await d.drain(20)
        await d.close()
        return out

    return asyncio.run(go())


def test_pending_fires_after_a_crash(tmp_path: Path, receiver: Receiver) -> None:
    state = tmp_path / "state"
    marker = tmp_path / "spawned"
    script = write_script(tmp_path / "agent", f"open({str(marker)!r}, 'a').write('x')\n")
    toml = {"routines": {"r": {"argv": [str(script)]}}}
    mons = {
        "hook": monitor({"type": "webhook-out", "url": receiver.url}, name="hook"),
        "note": monitor({"type": "notify"}, name="note"),
        "agent": monitor({"type": "run", "command": [str(script)], "prompt": "{event}",
                          "cwd": str(tmp_path)}, name="agent"),
        "rout": monitor({"type": "routine", "routine": "r"}, name="rout"),
    }
    store = Store(state)
    events = {}
    for name, mon in mons.items():
        events[name] = event(mon, f"{name} fired")
        fire(store, mon, events[name])  # ... and the daemon dies before dispatch
    done = _restart(state, mons, toml)

    assert {(r.monitor, r.outcome) for r in done} == {
        ("hook", "resent"), ("note", "resent"), ("agent", "interrupted"), ("rout", "interrupted")}
    store = Store(state)
    # webhook-out: at-least-once, the same id as Idempotency-Key
    [req] = receiver.requests
    assert req.headers["Idempotency-Key"] == events["hook"].id
    hook = record(store, mons["hook"], events["hook"])
    assert hook["status"] == "succeeded" and hook["recovered"] is True
    # notify: at-least-once
    assert any("NOTIFY note: note: note fired" in line for line in notifications(store))
    assert record(store, mons["note"], events["note"])["status"] == "succeeded"
    # run / routine: at-most-once, never re-spawned
    assert not marker.exists()
    for name in ("agent", "rout"):
        rec = record(store, mons[name], events[name])
        assert rec["status"] == "interrupted"
        assert "not re-spawned (at-most-once)" in rec["reason"]
    # a second restart finds nothing left to do
    assert _restart(state, mons, toml) == []
    assert len(receiver.requests) == 1


def test_dispatched_run_is_interrupted_and_changed_monitor_not_resent(
        tmp_path: Path, receiver: Receiver) -> None:
    state = tmp_path / "state"
    store = Store(state)
    agent = monitor({"type": "run", "command": ["true"], "prompt": ""}, name="agent")
    ev = event(agent)
    fire(store, agent, ev)
    store.update_fire("agent", ev.id, status="dispatched", action="run")  # crash mid-run
    old = monitor({"type": "webhook-out", "url": receiver.url}, name="hook")
    old_ev = event(old)
    fire(store, old, old_ev)
    gone = monitor({"type": "notify"}, name="gone")
    gone_ev = event(gone)
    fire(store, gone, gone_ev)
    edited = monitor({"type": "webhook-out", "url": receiver.url + "/v2"}, name="hook")

    done = _restart(state, {"agent": agent, "hook": edited})
    assert {r.outcome for r in done} == {"interrupted"}
    store = Store(state)
    assert "dispatched at start: outcome unknown" in record(store, agent, ev)["reason"]
    assert "fingerprint" in record(store, old, old_ev)["reason"]
    assert "no longer configured" in record(store, gone, gone_ev)["reason"]
    assert receiver.requests == [] and notifications(store) == []


def test_shutdown_mid_delivery_is_resent_with_the_same_id(tmp_path: Path,
                                                          receiver: Receiver) -> None:
    state = tmp_path / "state"
    mon = monitor({"type": "webhook-out", "url": receiver.url}, name="hook")
    ev = event(mon)
    receiver.hold = threading.Event()  # the receiver sits on the first request

    async def first_life() -> None:
        store = Store(state)
        fire(store, mon, ev)
        d = make_dispatcher(store)
        await d.dispatch(mon, ev)
        while not receiver.requests:
            await asyncio.sleep(0.01)
        assert not await d.drain(0.05)
        await d.close()  # shutdown while the POST is in flight

    asyncio.run(asyncio.wait_for(first_life(), 20))
    rec = record(Store(state), mon, ev)
    assert rec["status"] == "dispatched" and "re-sent at the next start" in rec["reason"]
    receiver.hold.set()
    receiver.hold = None
    done = _restart(state, {"hook": mon})
    assert [(r.event_id, r.outcome) for r in done] == [(ev.id, "resent")]
    assert [r.headers["Idempotency-Key"] for r in receiver.wait_for(2)] == [ev.id, ev.id]
    assert record(Store(state), mon, ev)["status"] == "succeeded"


def test_resend_after_a_crash_repeats_the_body_and_signature_byte_for_byte(
        tmp_path: Path, receiver: Receiver) -> None:
    """The fire record's JSON sorts keys: a body rebuilt from it reorders ``meta``, and
    the signature of one Idempotency-Key would differ between attempts."""
    state = tmp_path / "state"
    environ = {"PATH": os.environ["PATH"], "HOOK_SECRET": "s3cret"}
    mon = monitor({"type": "webhook-out", "url": receiver.url, "secretEnv": "HOOK_SECRET"},
                  name="hook")
    ev = dataclasses.replace(event(mon), meta={"zeta": 1, "exitCode": 1, "alpha": "é"})
    receiver.hold = threading.Event()

    async def life(first: bool) -> None:
        store = Store(state)
        d = make_dispatcher(store, environ=environ)
        if first:
            fire(store, mon, ev)
            await d.dispatch(mon, ev)
            while not receiver.requests:
                await asyncio.sleep(0.01)
            await d.close()  # the crash: the first attempt got no answer
            return
        await recovery.recover(store, {"hook": mon}, d)
        assert await d.drain(20)
        await d.close()

    asyncio.run(asyncio.wait_for(life(True), 20))
    receiver.hold.set()
    receiver.hold = None
    asyncio.run(asyncio.wait_for(life(False), 20))
    first, again = receiver.wait_for(2)
    assert again.headers["Idempotency-Key"] == first.headers["Idempotency-Key"] == ev.id
    assert again.body == first.body
    assert b'"meta":{"zeta":1,"exitCode":1,"alpha":"\xc3\xa9"}' in first.body
    assert (again.headers["X-Monitors-Signature-256"]
            == first.headers["X-Monitors-Signature-256"])
    assert record(Store(state), mon, ev)["status"] == "succeeded"


DAEMON = """
import asyncio, os, sys
sys.path.insert(0, {root!r})
from tests.actions.conftest import event, fire, make_dispatcher, monitor
from reconciler.state.store import Store

async def main():
    store = Store({state!r})
    mon = monitor({{"type": "run", "command": [{agent!r}], "prompt": "", "cwd": {cwd!r},
                   "env": {{"GATE": {gate!r}}}}}, name="agent")
    ev = event(mon)
    fire(store, mon, ev)
    d = make_dispatcher(store, environ={{"PATH": os.environ["PATH"]}})
    await d.dispatch(mon, ev)
    while (store.read_fire("agent", ev.id)["status"] != "dispatched"
           or not os.path.exists({runs!r})):
        await asyncio.sleep(0.01)
    print(ev.id, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_sigkill_mid_run_is_interrupted_not_respawned(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.conftest import ROOT

    state, gate, runs = tmp_path / "state", tmp_path / "gate", tmp_path / "runs"
    agent = write_script(tmp_path / "agent", f"""
import os, time
open({str(runs)!r}, "a").write("run\\n")
deadline = time.monotonic() + 20
while not os.path.exists(os.environ["GATE"]) and time.monotonic() < deadline:
    time.sleep(0.01)
""")
    code = DAEMON.format(root=str(ROOT), state=str(state), agent=str(agent), cwd=str(tmp_path),
                         gate=str(gate), runs=str(runs))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        event_id = proc.stdout.readline().strip()
        assert event_id, "the daemon did not dispatch"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        gate.write_text("go")  # let the orphaned agent end
    mon = monitor({"type": "run", "command": [str(agent)], "prompt": "", "cwd": str(tmp_path),
                   "env": {"GATE": str(gate)}}, name="agent")
    done = _restart(state, {"agent": mon})
    assert [(r.event_id, r.outcome) for r in done] == [(event_id, "interrupted")]
    rec = Store(state).read_fire("agent", event_id)
    assert rec is not None and rec["status"] == "interrupted"
    assert "outcome unknown; not re-spawned (at-most-once)" in rec["reason"]
    assert runs.read_text() == "run\n"  # spawned once, never again


def test_resend_after_a_crash_carries_the_attempt_count(tmp_path: Path,
                                                        receiver: Receiver) -> None:
    state = tmp_path / "state"
    mon = monitor({"type": "webhook-out", "url": receiver.url}, name="hook")
    ev = event(mon)
    receiver.script = [(503, {})]  # attempt 1 fails; the "crash" comes in the backoff

    async def first_life() -> None:
        store = Store(state)
        fire(store, mon, ev)
        d = make_dispatcher(store, backoff_base=30.0, backoff_cap=30.0)
        await d.dispatch(mon, ev)
        while not receiver.requests:
            await asyncio.sleep(0.01)
        await d.close()

    asyncio.run(asyncio.wait_for(first_life(), 20))
    # each attempt is recorded before its request: what a SIGKILL would leave behind
    assert record(Store(state), mon, ev)["attempts"] == 1

    async def second_life() -> list[recovery.Recovered]:
        store = Store(state)
        d = make_dispatcher(store)
        out = await recovery.recover(store, {"hook": mon}, d)
        assert await d.drain(20)
        await d.close()
        return out

    assert [r.outcome for r in asyncio.run(second_life())] == ["resent"]
    sent = receiver.wait_for(2)
    assert [r.headers["X-Monitors-Attempt"] for r in sent] == ["1", "2"]
    assert {r.headers["Idempotency-Key"] for r in sent} == {ev.id}
    rec = record(Store(state), mon, ev)
    assert rec["status"] == "succeeded" and rec["attempts"] == 2
