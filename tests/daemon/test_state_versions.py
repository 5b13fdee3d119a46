"""A state file of a newer version is refused, shown, and never overwritten by the daemon."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


def test_newer_state_version_is_refused_shown_and_never_overwritten(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 500ms}\ncondition: {mode: every}\n"
                                      "action: {type: notify}\n")
    d = daemons().start()
    wait_for(lambda: d.fires("tick"), what="a first fire", log=d.log)
    state = repo.state / "monitors" / "tick" / "state.json"
    future = json.dumps({"version": 99, "fromTheFuture": True})
    tmp = state.with_name("state.json.new")

    def appear() -> bool:
        # it appears while the daemon runs (again if a write already under way when it
        # was put there replaced it: an outside writer takes no lock)
        if not state.exists() or state.read_text() != future:
            tmp.write_text(future)
            os.replace(tmp, state)
        return "not run" in d.log_text()

    wait_for(appear, what="the monitor parked", log=d.log)
    # the write that found it was refused (its fire record undone) and nothing ran since
    fired = len(d.fires("tick"))
    assert "tick" in d.running() and state.read_text() == future  # kept untouched
    reason = ("state.json has format version 99, newer than this monitors supports "
              "(kept untouched)")
    listing = d.cli("list")
    assert listing.returncode == 0, listing.stderr
    assert "tick  refused" in listing.stdout, listing.stdout
    assert f"refused: {reason}" in listing.stdout and "STALLED" not in listing.stdout
    view = d.cli("view", "tick")
    assert view.returncode == 0, view.stderr
    assert reason in view.stdout and "source:" in view.stdout
    assert len(d.fires("tick")) == fired and state.read_text() == future
    # after a restart it is refused at start and still kept
    assert d.stop() == 0
    again = daemons(log_name="again.log").start()
    wait_for(lambda: "not run" in again.log_text(), what="refused at start", log=again.log)
    assert state.read_text() == future
    assert again.stop() == 0
