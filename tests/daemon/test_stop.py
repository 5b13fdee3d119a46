"""`monitors stop`: the daemon of a state directory exits cleanly on request."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def test_stop_ends_the_daemon_cleanly_and_is_idempotent(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s"))
    d = daemons().start()
    wait_for(lambda: "tick" in d.running(), what="tick running", log=d.log)
    assert d.proc is not None
    pid = d.proc.pid
    r = d.cli("stop")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"Stopped the daemon (pid {pid})."
    assert d.proc.wait(timeout=30) == 0
    again = d.cli("stop")
    assert again.returncode == 0
    assert again.stdout.startswith("No daemon is running for ")
