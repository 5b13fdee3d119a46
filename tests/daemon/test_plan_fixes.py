"""Regression tests for plan/apply findings that need the real daemon (a subprocess).

Settings the daemon does not run with, actions naming undefined channels, the
control API's argument checks, apply's first-poll report and the update reason
in the daemon log.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler import settings
from reconciler.daemon import protocol
from tests.conftest import Repo
from tests.daemon.conftest import WAIT, Daemon, monitor_yaml, read_json, wait_for

MISMATCH = ("the daemon runs with other settings ({what}): restart it (`monitors stop`, then "
            "`monitors apply`) to use them (daemon pid {pid})")


def _raw(state: Path, line: bytes) -> dict[str, Any]:
    """Send one raw control request line; return the decoded reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT)
        sock.connect(protocol.connect_path(state))
        sock.sendall(line + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    return reply


def _generation(repo: Repo) -> int:
    return int((read_json(repo.state / "running.json") or {}).get("generation", -1))


def test_plan_and_apply_refuse_a_daemon_running_other_settings(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    names = [f"m{i}" for i in range(3)]
    for name in names:
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]",
                                                         interval="30s"))
    d = daemons().start()
    wait_for(lambda: set(d.running()) == set(names), what="all running", log=d.log)
    assert d.proc is not None
    pid = d.proc.pid
    status = _raw(repo.state, b'{"op": "status"}')
    cfg = settings.load(root=repo.root, state_dir=repo.state, device="test-box")
    assert status["settingsDigest"] == protocol.settings_digest(cfg)
    assert d.cli("plan").returncode == 0
    generation = _generation(repo)

    repo.write("monitors.toml", '[layers]\nuser = "nope.d"\n')  # planned 3 stops
    toml_changed = MISMATCH.format(what="monitors.toml changed since it started", pid=pid)
    plan = d.cli("plan")
    assert plan.returncode == 1
    assert plan.stderr.strip() == f"error: {toml_changed}"
    assert "stop" not in plan.stdout
    apply = d.cli("apply", "--yes", "--allow-mass-stop")
    assert apply.returncode == 1 and apply.stderr.strip() == f"error: {toml_changed}"
    assert set(d.running()) == set(names) and _generation(repo) == generation
    listing = d.cli("list")
    assert f"warning: {toml_changed}" in listing.stdout, listing.stdout + listing.stderr
    assert "Daemon running on test-box" in listing.stdout

    repo.write("monitors.toml", 'device = "otherbox"\n')
    other = subprocess.run(
        [sys.executable, "-m", "reconciler", "--root", str(repo.root), "--state-dir",
         str(repo.state), "plan"], capture_output=True, text=True, timeout=60,
        cwd=repo.root, env={k: v for k, v in os.environ.items() if k != "MONITORS_DEVICE"})
    assert other.returncode == 1
    assert other.stderr.strip() == "error: " + MISMATCH.format(
        what="device test-box; monitors.toml changed since it started", pid=pid)

    (repo.root / "monitors.toml").write_text("# comments do not change the settings\n")
    again = d.cli("plan", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    assert set(d.running()) == set(names)


def test_a_monitor_naming_an_undefined_channel_keeps_its_applied_version(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s"))
    d = daemons().start()
    wait_for(lambda: "tick" in d.running(), what="tick running", log=d.log)
    applied = d.running()["tick"]["fingerprint"]
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s")
               .replace("type: notify\n", "type: notify\n  channel: nope\n"))
    wait_for(lambda: "keep tick: file is invalid" in d.log_text(), what="keep logged",
             log=d.log)
    assert "unknown channel 'nope'" in d.log_text()
    assert d.running()["tick"]["fingerprint"] == applied  # not replaced by the broken one
    plan = d.cli("plan")
    assert plan.returncode == 1
    assert "! tick is kept at its last applied version: file is invalid" in plan.stdout
    assert "action.channel: unknown channel 'nope' (known: log) [unknown-reference]" \
        in plan.stdout


def test_control_api_checks_request_arguments(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "[echo, a]", interval="30s"))
    d = daemons().start()
    bad = {
        b'{"op": "reconcile", "wait": "x"}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": -1}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": NaN}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "wait": true}': "wait: expected a number of seconds",
        b'{"op": "reconcile", "names": "tick"}': "names: expected a list of monitor names",
        b'{"op": "reconcile", "allowMassStop": "yes"}': "allowMassStop: expected true or false",
        b'{"op": "evaluate-now", "names": [1]}': "names: expected a list of monitor names",
        b'{"op": "reconcile", "wait": 1e300}': "wait: at most 315360000 seconds (3650d)",
        b'{"op": "first-polls", "wait": 1e300}': "wait: at most 315360000 seconds (3650d)",
        b'{"op": "first-polls", "names": "tick"}': "names: expected a list of monitor names",
        b'{"op": "clear-autopause"}': "name: expected a monitor name",
    }
    for line, error in bad.items():
        assert _raw(repo.state, line) == {"ok": False, "error": error}, line
    ok = _raw(repo.state, b'{"op": "reconcile", "wait": 0.5, "names": ["tick"]}')
    assert ok["ok"] is True and ok["firstPolls"]["tick"]["status"] in ("ok", "pending")
    polls = _raw(repo.state, b'{"op": "first-polls", "wait": 5, "names": ["tick", "nope"]}')
    assert polls == {"ok": True, "firstPolls": {"tick": {"status": "ok", "error": None}}}
    assert "ValueError" not in d.log_text()


def test_update_reason_names_a_field_once_in_the_daemon_log(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    base = monitor_yaml("repo-head", "[echo, a]", interval="30s")
    repo.write("monitors.d/repo-head.yml", base + "rateLimit: {max: 5, per: 1m}\n")
    d = daemons().start()
    wait_for(lambda: "repo-head" in d.running(), what="running", log=d.log)
    repo.write("monitors.d/repo-head.yml", base + "rateLimit: {max: 9, per: 2m}\n")
    line = wait_for(lambda: next((x for x in d.log_text().splitlines()
                                  if "update repo-head:" in x), ""),
                    what="update logged", log=d.log)
    # was "update repo-head: rateLimit, rateLimit changed: ..."
    assert "update repo-head: rateLimit changed: updated in place, baseline kept" in line


def test_apply_says_a_first_poll_is_still_running(detached: Repo) -> None:
    repo = detached
    repo.write("monitors.d/hang.yml", monitor_yaml("hang", '[sleep, "30"]', interval="60s"))
    repo.write("monitors.d/quick.yml", monitor_yaml("quick", "[echo, q]", interval="60s"))
    p = subprocess.run(
        [sys.executable, "-m", "reconciler", "--root", str(repo.root), "--state-dir",
         str(repo.state), "--device", "test-box", "apply", "--yes", "--wait", "1s"],
        capture_output=True, text=True, timeout=90, cwd=repo.root,
        env={**os.environ, "NO_COLOR": "1"})
    assert p.returncode == 1, p.stdout + p.stderr  # a first poll did not finish in time
    rows = {line.split()[1]: line for line in p.stdout.splitlines()
            if line.startswith("  ")}
    # was "pending hang start: not picked up within 1s" although it was picked up
    assert rows["hang"].split()[0] == "pending"
    assert rows["hang"].endswith(" start: first poll still running after 1s")
    assert rows["quick"].endswith("start: first poll ok")
    assert "not picked up" not in p.stdout
