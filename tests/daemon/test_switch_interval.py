"""``monitors run`` shortens the interpreter lock's switch interval (``daemon.options.
favour_event_loop``) so the event loop gets the lock back from a worker thread within
0.5 ms; ``run --once`` keeps CPython's default. Real ``monitors run`` processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from reconciler.daemon import options
from tests.conftest import Repo
from tests.factories import monitor_yaml

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import json, sys
from reconciler.cli import main
rc = main.run(sys.argv[1:])
print(json.dumps({"rc": rc, "switch": sys.getswitchinterval()}))
"""


def _run(repo: Repo, *extra: str, stop: bool) -> dict[str, float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "--root", str(repo.root), "--state-dir",
         str(repo.state), "--device", "test", "run", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        if stop:
            deadline = time.monotonic() + 60
            while not (repo.state / "running.json").exists():  # serving
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert out.strip(), err
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def test_the_daemon_hands_the_lock_back_within_half_a_millisecond(repo: Repo) -> None:
    repo.write("monitors.d/c.yml", monitor_yaml("c", "[echo, hi]", interval="1h"))
    default = sys.getswitchinterval()
    served = _run(repo, stop=True)
    assert served["switch"] == options.SWITCH_INTERVAL < default
    once = _run(repo, "--once", "--wait", "20s", stop=False)
    assert once == {"rc": 0, "switch": default}
