"""A running daemon never runs what a stranger could have written: a monitor file that
becomes world-writable is invalid, its last applied version keeps running, and the
error shows in the log, plan and list until the permissions are fixed."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def test_a_file_made_world_writable_keeps_its_last_applied_version(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    path = repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, safe]",
                                                          interval="500ms"))
    d = daemons().start()
    wait_for(lambda: "tick" in d.running(), what="tick running", log=d.log)
    fingerprint = d.running()["tick"]["fingerprint"]

    path.chmod(0o666)
    wait_for(lambda: "keep tick" in d.log_text(), what="keep logged", log=d.log)
    assert "unsafe-permissions" in d.log_text()
    # another user now rewrites it: the daemon must not run the new command
    pwned = repo.root / "pwned"
    path.write_text(monitor_yaml("tick", f"[touch, {pwned}]", interval="500ms"))
    checks = d.liveness("tick").get("checkCount", 0)
    wait_for(lambda: d.liveness("tick").get("checkCount", 0) >= checks + 4,
             what="four more polls of the kept version", log=d.log)
    assert not pwned.exists()
    assert d.running()["tick"]["fingerprint"] == fingerprint
    plan = d.cli("plan")
    assert plan.returncode == 1
    assert "! tick is kept at its last applied version" in plan.stdout
    assert "world-writable (mode 0666)" in plan.stdout
    row = json.loads(d.cli("list", "--json").stdout)["monitors"][0]
    assert row["status"] == "kept (file invalid)" and "unsafe-permissions" in row["error"]

    # the owner takes the file back (and so vouches for it): the new version runs
    path.chmod(0o644)
    wait_for(lambda: d.running()["tick"]["fingerprint"] != fingerprint,
             what="the fixed file applied", log=d.log)
    wait_for(pwned.exists, what="the now trusted command ran", log=d.log)
    assert "all monitor files are valid again" in d.log_text()
    assert d.stop() == 0
