"""Failover owners on a real etcd: two or three real daemons (devices a, b, c), each on
its own temp repository, share one ``owners:`` monitor that watches one file and posts
to one loopback receiver. Exactly one device holds the etcd key and fires; a SIGTERM
hands over at once, a kill -9 within the TTL, and a holder stopped (SIGSTOP) past its
TTL never fires on its old token when it comes back (``daemon.leases``)."""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.client import control
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.daemon.etcdserver import Etcd, etcd_server  # noqa: F401 (fixture)
from tests.helpers import json_receiver

TTL = 2.0
NAME = "shared"

pytestmark = pytest.mark.timeout(300)


class Receiver:
    """A webhook-out receiver on 127.0.0.1 (``tests.helpers.json_receiver``): its URL and
    the JSON bodies POSTed to it, in order."""

    def __init__(self, url: str, bodies: list[dict[str, Any]]) -> None:
        self.url, self.bodies = url, bodies

    def events(self, value: str) -> set[str]:
        """The distinct event ids delivered for the observation ``value``."""
        return {b["id"] for b in list(self.bodies) if b["observation"].strip() == value}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with json_receiver() as (url, bodies):
        yield Receiver(url, bodies)


class Owner(Daemon):
    """A daemon as device ``device`` on its own repository (no HTTP server)."""

    def __init__(self, repo: Repo, device: str) -> None:
        super().__init__(repo, log_name=f"daemon-{device}.log")
        self.device = device
        self.env = {"MONITORS_HTTP_LISTEN": ""}

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", "--root", str(self.repo.root),
                "--state-dir", str(self.repo.state), "--device", self.device, *extra]

    def seat(self) -> dict[str, Any]:
        """This daemon's view of the shared monitor's key ({} before it asked)."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            return {}
        try:
            status: dict[str, Any] | None = dict(control.status(self.repo.state) or {})
        except Exception:  # a stopped (SIGSTOP) daemon does not answer
            return {}
        owners = (status or {}).get("owners") or {}
        seat: dict[str, Any] = (owners.get("monitors") or {}).get(NAME) or {}
        return seat


class Fleet:
    """Devices sharing ``owners: [a, b, c]`` over one etcd and one watched file."""

    def __init__(self, base: Path, etcd: Etcd, hook: str, devices: tuple[str, ...], *,
                 slow: float = 0.0) -> None:
        self.event = base / "event.txt"
        self.event.write_text("v0\n")
        self.daemons: dict[str, Owner] = {}
        command = (f'[sh, -c, "sleep {slow:g}; cat {self.event}"], timeout: 60s' if slow
                   else f'[cat, "{self.event}"]')
        for device in devices:
            root = base / device
            (root / "monitors.d" / "overlays").mkdir(parents=True)
            (root / "system").mkdir()
            repo = Repo(root)
            repo.write("monitors.toml", f"""
                [etcd]
                endpoints = ["{etcd.url}"]
                prefix = "/test/"
                ttl = "{TTL:g}s"
            """)
            repo.write(f"monitors.d/{NAME}.yml", f"""
                name: {NAME}
                source: {{type: poll, command: {command}, interval: 500ms}}
                action: {{type: webhook-out, url: "{hook}"}}
                owners: [{", ".join(devices)}]
            """)
            self.daemons[device] = Owner(repo, device)

    def start(self, device: str) -> Owner:
        d = self.daemons[device]
        d.proc = None
        d.start()
        return d

    def holders(self) -> list[str]:
        return [n for n, d in self.daemons.items()
                if d.proc is not None and d.seat().get("role") == "holder"]

    def holder(self, *, other_than: str | None = None, timeout: float = 20.0) -> str:
        """Wait until exactly one live daemon (not ``other_than``) holds the key."""
        def one() -> str | None:
            held = self.holders()
            return held[0] if len(held) == 1 and held[0] != other_than else None
        return str(wait_for(one, timeout=timeout, what="one holder"))

    def polled(self, device: str) -> None:
        """Wait until ``device`` has a baseline (one check since it took the key)."""
        d = self.daemons[device]
        checks = d.liveness(NAME).get("checkCount", 0)
        wait_for(lambda: d.liveness(NAME).get("checkCount", 0) > checks, what="a check",
                 log=d.log)

    def emit(self, value: str) -> None:
        self.event.write_text(value + "\n")

    def close(self) -> None:
        for d in self.daemons.values():
            if d.proc is not None and d.proc.poll() is None:
                with_cont(d)
                d.proc.kill()
                d.proc.wait(timeout=5)


def with_cont(d: Daemon) -> None:
    assert d.proc is not None
    os.killpg(d.proc.pid, signal.SIGCONT)


@pytest.fixture
def fleet(tmp_path: Path, etcd_server: Etcd,  # noqa: F811
          receiver: Receiver) -> Iterator[Callable[..., Fleet]]:
    made: list[Fleet] = []

    def make(*devices: str, slow: float = 0.0) -> Fleet:
        f = Fleet(tmp_path, etcd_server, receiver.url, devices, slow=slow)
        made.append(f)
        for device in devices:
            f.start(device)
        return f

    yield make
    for f in made:
        f.close()


def delivered(receiver: Receiver, value: str, *, log: Path | None = None) -> str:
    """Wait until ``value`` was delivered; return the event id."""
    ids = wait_for(lambda: receiver.events(value), what=f"{value} delivered", log=log)
    return next(iter(ids))


def test_exactly_one_device_polls_and_fires(fleet: Callable[..., Fleet],
                                            receiver: Receiver) -> None:
    f = fleet("a", "b", "c")
    holder = f.holder()
    d = f.daemons[holder]
    wait_for(lambda: d.liveness(NAME).get("checkCount", 0) >= 2, what="holder polls")
    f.emit("v1")
    delivered(receiver, "v1", log=d.log)
    time.sleep(1.5)  # three more polls: a duplicate would have arrived by now
    assert len(receiver.events("v1")) == 1
    assert [b["fencingToken"] for b in receiver.bodies] == [d.seat()["token"]]
    for name, other in f.daemons.items():
        if name != holder:
            assert other.liveness(NAME).get("checkCount", 0) == 0, name
            assert other.seat() == {"role": "standby", "holder": holder, "token": None,
                                    "fenced": None, "error": None}
    assert d.fires(NAME)[0]["event"]["fencingToken"] == d.seat()["token"]
    listing = d.cli("list").stdout
    assert f"holder: {holder}" in listing
    other = next(o for n, o in f.daemons.items() if n != holder)
    assert f"standby (holder: {holder})" in other.cli("list").stdout
    assert f"{NAME}: holder: {holder}" in d.cli("plan").stdout
    assert f"standby (holder: {holder})" in other.cli("view", NAME).stdout
    plan = json.loads(other.cli("plan", "--json").stdout)
    assert plan["owners"] == {NAME: f"standby (holder: {holder})"}


def test_sigterm_hands_over_at_once_and_the_standby_fires_the_next_event(
        fleet: Callable[..., Fleet], receiver: Receiver) -> None:
    f = fleet("a", "b")
    first = f.holder()
    f.polled(first)
    f.emit("v1")
    delivered(receiver, "v1", log=f.daemons[first].log)
    assert f.daemons[first].stop() == 0
    second = f.holder(other_than=first, timeout=5)
    f.emit("v2")
    delivered(receiver, "v2", log=f.daemons[second].log)
    time.sleep(1.0)
    assert [len(receiver.events(v)) for v in ("v1", "v2")] == [1, 1]
    # the new holder continued from the old one's state: v1 was not fired again
    tokens = [b["fencingToken"] for b in receiver.bodies]
    assert tokens[0] < tokens[1]


def test_a_holder_stopped_past_its_ttl_never_fires_on_its_old_token(
        fleet: Callable[..., Fleet], receiver: Receiver) -> None:
    # Each check takes 3s (sleep, then read the file), so the SIGSTOP lands inside a
    # poll the holder was admitted to: on SIGCONT that poll sees v2 against its v1
    # baseline and decides to fire. Only the fencing check stops it.
    f = fleet("a", "b", slow=3.0)
    old = f.holder()
    d = f.daemons[old]
    f.polled(old)
    f.emit("v1")
    delivered(receiver, "v1", log=d.log)
    old_token = d.seat()["token"]
    assert d.proc is not None
    time.sleep(0.5)  # into the next (3s) check
    os.killpg(d.proc.pid, signal.SIGSTOP)
    try:
        f.emit("v2")
        new = f.holder(other_than=old, timeout=TTL * 4)
        delivered(receiver, "v2", log=f.daemons[new].log)
    finally:
        os.killpg(d.proc.pid, signal.SIGCONT)
    wait_for(lambda: "is stale" in d.log_text(), what="the stale fire refused", log=d.log)
    wait_for(lambda: d.seat().get("role") == "standby", what="the old holder stands by",
             log=d.log)
    assert f"not fired: fencing token {old_token} is stale ({new} holds it" in d.log_text()
    time.sleep(1.0)
    assert len(receiver.events("v2")) == 1
    assert old_token not in [b["fencingToken"] for b in receiver.bodies[1:]]
    assert f.holders() == [new]


def test_kill_9_takes_over_within_the_ttl(fleet: Callable[..., Fleet],
                                          receiver: Receiver) -> None:
    f = fleet("a", "b")
    old = f.holder()
    d = f.daemons[old]
    assert d.proc is not None
    killed = time.monotonic()
    os.killpg(d.proc.pid, signal.SIGKILL)
    d.proc.wait(timeout=5)
    new = f.holder(other_than=old, timeout=TTL * 4)
    took = time.monotonic() - killed
    assert took < TTL + 2.0, took  # TTL plus the status round-trips of this test
    f.emit("v1")
    delivered(receiver, "v1", log=f.daemons[new].log)


def test_etcd_down_stops_every_fire_and_they_resume_when_it_is_back(
        fleet: Callable[..., Fleet], receiver: Receiver, etcd_server: Etcd) -> None:  # noqa: F811
    f = fleet("a", "b")
    holder = f.holder()
    f.polled(holder)
    etcd_server.stop()
    f.emit("v1")
    for d in f.daemons.values():
        wait_for(lambda: d.seat().get("role") == "unreachable",  # noqa: B023
                 what="etcd unreachable", log=d.log)
    assert "ETCD DOWN" in f.daemons[holder].cli("list").stdout
    time.sleep(1.5)
    assert receiver.bodies == []
    etcd_server.start()
    ids = delivered(receiver, "v1", log=f.daemons[holder].log)
    time.sleep(1.0)
    assert receiver.events("v1") == {ids}


def test_randomized_hand_overs_deliver_each_event_once(
        fleet: Callable[..., Fleet], receiver: Receiver) -> None:
    f = fleet("a", "b", "c")
    rng = random.Random(int(os.environ.get("OWNERS_SEED", "16")))
    deadline = time.monotonic() + float(os.environ.get("OWNERS_TRIAL_SECONDS", "120"))
    trials = 0
    while trials < 30 and time.monotonic() < deadline:
        trials += 1
        holder = f.holder(timeout=TTL * 5)
        d = f.daemons[holder]
        assert d.proc is not None
        how = rng.choice(["none", "term", "kill", "stop"])
        value = f"t{trials}"
        if how == "term":
            d.stop()
        elif how == "kill":
            os.killpg(d.proc.pid, signal.SIGKILL)
            d.proc.wait(timeout=5)
        elif how == "stop":
            os.killpg(d.proc.pid, signal.SIGSTOP)
        if rng.random() < 0.5:
            time.sleep(rng.uniform(0, TTL))
        f.emit(value)
        delivered(receiver, value, log=d.log)
        if how == "stop":
            os.killpg(d.proc.pid, signal.SIGCONT)
        elif how in ("term", "kill"):
            f.start(holder)
    time.sleep(1.5)
    counts = {f"t{i}": len(receiver.events(f"t{i}")) for i in range(1, trials + 1)}
    assert set(counts.values()) == {1}, counts
    assert trials >= 5, f"only {trials} trials fit in the time"


def test_a_device_dropped_from_owners_releases_the_key_at_once(
        fleet: Callable[..., Fleet], receiver: Receiver) -> None:
    f = fleet("a", "b")
    old = f.holder()
    new = "b" if old == "a" else "a"
    d = f.daemons[old]
    path = d.repo.user / f"{NAME}.yml"
    path.write_text(path.read_text().replace("owners: [a, b]", f"owners: [{new}]"))
    # the old holder keeps running (its lease lives on), yet the other takes the key
    assert f.holder(other_than=old, timeout=15) == new
    assert d.proc is not None and d.proc.poll() is None
    f.emit("v1")
    delivered(receiver, "v1", log=f.daemons[new].log)
