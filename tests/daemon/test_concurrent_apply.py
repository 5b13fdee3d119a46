"""Two `monitors apply --yes` at once with no daemon running: one daemon, both succeed."""

from __future__ import annotations

import os
import subprocess
import sys

from reconciler.state import lock
from tests.conftest import Repo
from tests.factories import monitor_yaml


def test_concurrent_applies_share_one_daemon(repo: Repo) -> None:
    for name in ("a", "b"):
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]",
                                                          interval="30s"))
    argv = [sys.executable, "-m", "reconciler", "--root", str(repo.root), "--state-dir",
            str(repo.state), "--device", "test-box"]
    procs = [subprocess.Popen([*argv, "apply", "--yes", "--wait", "20s"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=repo.root) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=90) for p in procs]
        for p, (out, err) in zip(procs, outs, strict=True):
            assert p.returncode == 0, out + err
        holder = lock.holder_pid(repo.state)
        assert holder is not None and lock.is_locked(repo.state)
        os.kill(holder, 0)  # the one daemon is alive
    finally:
        subprocess.run([*argv, "stop"], capture_output=True, timeout=60)
    assert not lock.is_locked(repo.state)
