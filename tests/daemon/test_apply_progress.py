"""``apply`` says what it does as it happens, and Ctrl-C says what keeps running.

The real CLI and the daemon it starts, as subprocesses; output is read with a bound
(select on the pipe), never a sleep.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from reconciler.sources import pid as pid_mod
from tests.conftest import Repo
from tests.daemon.conftest import WAIT, Daemon, wait_for
from tests.factories import monitor_yaml

SLOW = "[sh, -c, 'sleep 30; echo done']"  # a first poll that outlasts the test


def _apply(repo: Repo, *args: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "reconciler", "--root", str(repo.root), "--state-dir",
            str(repo.state), "--device", "test-box", "apply", "--yes", *args]
    # SIGINT back to its default in the child: a pytest started in the background of a
    # shell without job control (or an xdist worker) ignores SIGINT, the child inherits
    # that, Python then installs no KeyboardInterrupt handler and Ctrl-C does nothing
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=repo.root, env={**os.environ, "NO_COLOR": "1"},
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _read_until(proc: subprocess.Popen[bytes], marker: str, *, timeout: float = WAIT) -> str:
    """stdout of ``proc`` up to and including the line holding ``marker``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while marker.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} within {timeout}s; got:\n{seen.decode()}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"stdout closed before {marker!r}; got:\n{seen.decode()}"
            seen += chunk
    return seen.decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_apply_shows_the_plan_the_daemon_and_pending_monitors_at_once(detached: Repo) -> None:
    repo = detached
    repo.write("monitors.d/slow.yml", monitor_yaml("slow", SLOW, interval="60s"))
    repo.write("monitors.d/quick.yml", monitor_yaml("quick", "[echo, hi]", interval="60s"))
    proc = _apply(repo, "--wait", "60s")
    try:
        # all of this while the first poll of slow still runs (it takes 30 s)
        out = _read_until(proc, "still pending after 5s: slow\n")
        assert "+ slow will be started" in out and "+ quick will be started" in out
        assert "Plan: 2 to start" in out
        assert "Started the daemon (pid " in out
        assert "Waiting up to 1m for the first poll of quick, slow." in out \
            or "Waiting up to 1m for the first poll of slow, quick." in out
        assert "quick" not in out.split("still pending after 5s:")[1]
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_ctrl_c_says_what_keeps_running_and_how_to_look_or_stop(detached: Repo) -> None:
    repo = detached
    repo.write("monitors.d/slow.yml", monitor_yaml("slow", SLOW, interval="60s"))
    proc = _apply(repo, "--wait", "60s")
    try:
        out = _read_until(proc, "Waiting up to")
        pid = int(out.split("Started the daemon (pid ")[1].split(")")[0])
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # was: "Aborted." and nothing else, while the daemon went on applying the change
    assert proc.returncode == 130, err
    lines = err.decode().strip().splitlines()
    assert lines == [f"Interrupted: the daemon (pid {pid}) keeps running and applies the change "
                     "(first poll still pending: slow). `monitors list` shows how it goes; "
                     "`monitors stop` stops the daemon."]
    assert _alive(pid)
    listed = Daemon(repo).argv("list")
    shown = wait_for(lambda: (r := subprocess.run(listed, capture_output=True, text=True,
                                                  timeout=60)).returncode == 0 and r.stdout,
                     what="list")
    assert "slow" in shown


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
