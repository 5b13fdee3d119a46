"""``monitors run`` shortens the interpreter lock's switch interval (``daemon.options.
favour_event_loop``) so the event loop gets the lock back from a worker thread within
0.5 ms, and freezes its heap once it serves (``settle_heap``); ``run --once`` keeps
CPython's switch interval and freezes only at exit. Real ``monitors run`` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from reconciler.daemon import options, startreport
from tests.conftest import Repo
from tests.factories import monitor_yaml

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import json, sys
from reconciler.cli import main
rc = main.run(sys.argv[1:])
import gc
print(json.dumps({"rc": rc, "switch": sys.getswitchinterval(), "frozen": gc.get_freeze_count()}))
"""


def _run(repo: Repo, *extra: str, stop: bool) -> dict[str, float]:
    ready_r, ready_w = os.pipe()  # closed by the daemon once it serves (startreport)
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, "--root", str(repo.root), "--state-dir",
         str(repo.state), "--device", "test", "run", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, startreport.ENV: str(ready_w)}, pass_fds=(ready_w,))
    os.close(ready_w)
    try:
        if stop:
            with os.fdopen(ready_r, "rb") as ready:
                assert ready.read() == b""  # EOF: ready (the test's timeout bounds it)
            proc.send_signal(signal.SIGTERM)
        else:
            os.close(ready_r)
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
    assert once["rc"] == 0 and once["switch"] == default


def test_the_daemon_freezes_its_heap_once_it_serves(repo: Repo) -> None:
    """What the daemon built at start is left out of the cyclic collector's full
    collections (95-136 ms each with 1,000 monitors under HTTP load, stalls of the
    loop); a one-shot run freezes only at exit (after this driver's print)."""
    repo.write("monitors.d/c.yml", monitor_yaml("c", "[echo, hi]", interval="1h"))
    served = _run(repo, stop=True)
    assert served["rc"] == 0 and served["frozen"] > 10_000  # modules, monitors, ...
    once = _run(repo, "--once", "--wait", "20s", stop=False)
    assert once["rc"] == 0 and once["frozen"] == 0
