"""The fixes seen from outside: the real daemon as a subprocess on a temp repository."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

from reconciler.sources import pid as pid_mod
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, daemons, wait_for  # noqa: F401 (fixture)

SPINNER = "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}done"


def test_list_right_after_apply_shows_the_first_poll(repo: Repo) -> None:
    repo.write("monitors.d/slow.yml", """
        source: {type: poll, command: [echo, hi], interval: 1h}
        action: {type: notify}
    """)
    helper = Daemon(repo)
    try:
        applied = helper.cli("apply", "--yes", "--wait", "15s")
        assert "Started the daemon" in applied.stdout, applied.stdout + applied.stderr
        assert "ok       slow" in applied.stdout, applied.stdout
        listed = helper.cli("list")  # at once: the next coalesced flush is seconds away
        assert "never polled" not in listed.stdout, listed.stdout
        assert "checked 1x" in listed.stdout, listed.stdout
        assert helper.liveness("slow").get("checkCount") == 1
    finally:
        lock = repo.state / "daemon.lock"
        pid = int(lock.read_text().strip() or 0) if lock.exists() else 0
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not pid_mod.alive(pid), what="detached daemon exit")


def test_freezing_template_neither_wedges_the_daemon_nor_sigterm(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:  # noqa: F811
    repo.write("monitors.d/spin.yml", f"""
        source: {{type: poll, command: [echo, x], interval: 1s}}
        condition: {{mode: every}}
        action: {{type: notify, message: "{SPINNER}"}}
    """)
    repo.write("monitors.d/tick.yml", """
        source: {type: poll, command: [date, +%s%N], interval: 1s}
        action: {type: notify}
    """)
    d = daemons().start()
    wait_for(lambda: any(f.get("status") == "failed" for f in d.fires("spin")),
             what="a failed spin fire", log=d.log)
    before = d.liveness("tick").get("checkCount", 0)
    wait_for(lambda: d.liveness("tick").get("checkCount", 0) >= before + 3,
             what="tick keeps polling", log=d.log)
    failed = next(f for f in d.fires("spin") if f.get("status") == "failed")
    assert "template: render budget exceeded" in json.dumps(failed)
    started = time.monotonic()
    assert d.stop(signal.SIGTERM, timeout=30) == 0
    assert time.monotonic() - started < 30
