"""SIGHUP: the daemon re-reads monitors.toml and reconciles; an invalid file keeps the
settings in use (issue 9 §8)."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml

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
    assert re.search(r"monitors\.toml:\d+:\d+: invalid TOML", line), line

    repo.write("monitors.toml", OPS + "x = " + "[" * 500 + "]" * 500 + "\n")  # RecursionError
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "nested deeper than" in d.log_text(), what="refused deep TOML", log=d.log)
    assert d.proc.poll() is None and "a" in d.running()
    assert "Traceback" not in d.log_text()
    assert d.stop() == 0


def test_sighup_refuses_a_settings_file_lint_would_refuse(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    """The reload applies the same checks as start: the schema (an unknown key) and
    the trust rule (agents from a world-writable monitors.toml) keep the old settings."""
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]", interval="30s"))
    path = repo.write("monitors.toml", OPS)
    path.chmod(0o644)
    d = daemons().start()
    assert d.proc is not None and "a" in d.running()

    repo.write("monitors.toml", OPS + "[daemon]\nresyncc = '10s'\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "resyncc" in d.log_text(), what="schema refusal", log=d.log)
    line = next(x for x in d.log_text().splitlines() if "resyncc" in x)
    assert "keeping the settings in use" in line and "did you mean 'resync'" in line

    repo.write("monitors.toml", OPS + "[agents.x]\nargv = ['true', '{prompt}']\n")
    path.chmod(0o666)
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "unsafe-permissions" in d.log_text() or "another user" in d.log_text(),
             what="trust refusal", log=d.log)
    assert d.proc.poll() is None and "a" in d.running()
    assert "Traceback" not in d.log_text()
    path.chmod(0o644)
    assert d.stop() == 0


def test_a_reload_names_an_etcd_change_it_cannot_apply(repo: Repo) -> None:
    """``[etcd]`` is read at start (the lease and its client): a SIGHUP that adds or
    changes it says it needs a restart, instead of leaving owners monitors on
    ``standby (no [etcd])`` without a word."""
    from reconciler import settings
    from reconciler.daemon import reload

    repo.write("monitors.toml", OPS)
    cfg = settings.load(root=repo.root, device="a")
    assert reload.read(cfg).kept == ()
    repo.write("monitors.toml", OPS + '[etcd]\nendpoints = ["http://127.0.0.1:2379"]\n')
    kept = reload.read(cfg).kept
    assert any(k.startswith("[etcd]") for k in kept), kept
