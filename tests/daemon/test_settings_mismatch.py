"""plan and apply refuse a daemon that runs with other settings (device, root,
monitors.toml) and say how to restart it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

from reconciler import settings
from reconciler.daemon import protocol
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, raw_request, read_json, wait_for
from tests.factories import monitor_yaml

MISMATCH = ("the daemon runs with other settings ({what}): restart it (`monitors stop`, then "
            "`monitors apply`) to use them (daemon pid {pid})")


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
    status = raw_request(repo.state, b'{"op": "status"}')
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
