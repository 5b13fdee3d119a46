"""Two monitors with one fingerprint and no allowDuplicate: only the first runs and fires;
the other is held and listed as a duplicate."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon

EVERY = "condition:\n  mode: every\n"


def test_run_once_fires_a_duplicate_once(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    # two files, one fingerprint, no allowDuplicate: used to start (and fire) both
    for name in ("d1", "d2"):
        repo.write(f"monitors.d/{name}.yml", (
            "source:\n  type: poll\n  command: [echo, same]\n  interval: 30s\n" + EVERY +
            "action:\n  type: notify\n  message: 'saw {{ event }}'\n"))
    d = daemons()
    once = d.cli("run", "--once", "--wait", "20s")
    assert once.returncode == 0, once.stderr
    assert "polled d1" in once.stderr and "polled d2" not in once.stderr
    assert len(d.fires("d1")) == 1 and d.fires("d2") == []
    assert set(d.running()) == {"d1"}
    listing = json.loads(d.cli("list", "--json").stdout)
    d2 = next(r for r in listing["monitors"] if r["name"] == "d2")
    assert d2["status"] == "duplicate (held)"
    assert d2["reason"] == ("duplicate of d1 (same fingerprint); set allowDuplicate: true if "
                            "deliberate")
