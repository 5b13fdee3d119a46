"""A running daemon and odd entries in a layer: a symlink loop or a file name that is not
UTF-8 is that entry's own error; every other monitor of the layer keeps running (the
loop used to drop the whole layer, which stopped every monitor of it as "removed file")."""

from __future__ import annotations

import os
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def test_a_symlink_loop_or_a_non_utf8_name_stops_nothing(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    for name in ("a", "b"):
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, "[echo, hi]",
                                                          interval="500ms"))
    d = daemons().start()
    wait_for(lambda: {"a", "b"} <= set(d.running()), what="a and b running", log=d.log)

    os.symlink("loop.yml", repo.user / "loop.yml")
    (repo.user / os.fsdecode(b"\xff.yml")).write_bytes(b"x")
    wait_for(lambda: "bad-filename" in d.log_text() and "loop.yml" in d.log_text(),
             what="both entries reported", log=d.log)
    checks = d.liveness("a").get("checkCount", 0)
    wait_for(lambda: d.liveness("a").get("checkCount", 0) >= checks + 2,
             what="two more polls of a", log=d.log)
    assert {"a", "b"} <= set(d.running())
    log = d.log_text()
    assert "reconcile failed" not in log and "Traceback" not in log
    assert "stopped a" not in log and "stopped b" not in log
    assert d.stop() == 0
