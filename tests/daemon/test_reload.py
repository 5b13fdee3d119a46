"""SIGHUP: the daemon re-reads monitors.toml and reconciles; an invalid file keeps the
settings in use (issue 9 §8)."""

from __future__ import annotations

import signal
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, monitor_yaml, wait_for

OPS = '[channels.ops]\nurl = "json://127.0.0.1:9/hook"\n'


def test_sighup_rereads_monitors_toml_and_an_invalid_one_keeps_the_old(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    # "a" names a channel monitors.toml does not define yet: invalid, not started
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]", interval="30s")
               .replace("type: notify", "type: notify\n  channel: ops"))
    repo.write("monitors.toml", "# no channels yet\n")
    d = daemons().start()
    assert "a" not in d.running()
    assert d.proc is not None

    repo.write("monitors.toml", OPS)
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "a" in d.running(), what="a started after SIGHUP", log=d.log)
    assert "SIGHUP: re-read monitors.toml: changed" in d.log_text()
    # the daemon reports the settings it now runs with: plan sees no mismatch
    plan = d.cli("plan", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout + plan.stderr  # 0: no changes, no mismatch

    repo.write("monitors.toml", OPS + "[channels.ops\n")  # invalid TOML
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "keeping the settings in use" in d.log_text(), what="refused reload",
             log=d.log)
    assert d.proc.poll() is None and "a" in d.running()
    line = next(x for x in d.log_text().splitlines() if "keeping the settings in use" in x)
    assert "monitors.toml: invalid TOML" in line and "Traceback" not in d.log_text()
    assert d.stop() == 0
