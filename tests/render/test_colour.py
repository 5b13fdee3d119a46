"""Colour follows --no-color, NO_COLOR, FORCE_COLOR and TERM=dumb (``render.style.enabled``)."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess

import pytest

from reconciler.render import style
from tests.conftest import Repo, console_script, run_cli

ESC = "\x1b["
SGR = re.compile(r"\x1b\[[0-9;]*m")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "tty", "flag", "want"), [
    ({}, True, False, True),
    ({}, False, False, False),
    ({}, True, True, False),                                  # --no-color
    ({"NO_COLOR": "1"}, True, False, False),
    ({"NO_COLOR": ""}, True, False, True),                    # empty: not set
    ({"TERM": "dumb"}, True, False, False),
    ({"TERM": "xterm"}, True, False, True),
    ({"FORCE_COLOR": "1"}, False, False, True),
    ({"FORCE_COLOR": "1", "TERM": "dumb"}, False, False, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False, False),  # NO_COLOR wins
    ({"FORCE_COLOR": "1"}, True, True, False),                # the flag wins
])
def test_enabled_order(env: dict[str, str], tty: bool, flag: bool, want: bool) -> None:
    stream = _Tty() if tty else io.StringIO()
    assert style.enabled(stream, no_color=flag, environ=env) is want


def test_paint() -> None:
    assert style.paint("x", True, fg="red", bold=True) == "\x1b[1;31mx\x1b[0m"
    assert style.paint("x", False, fg="red") == "x"


@pytest.fixture
def planned(repo: Repo) -> Repo:
    repo.write("monitors.d/x.yml", "source: {type: file, path: /etc/hostname}\n"
                                   "action: {type: notify}\n")
    return repo


@pytest.mark.parametrize(("env", "want"), [
    ({}, False), ({"FORCE_COLOR": "1"}, True), ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ({"FORCE_COLOR": "1", "TERM": "dumb"}, True),
])
def test_plan_off_a_terminal(planned: Repo, env: dict[str, str], want: bool) -> None:
    r = run_cli(["plan"], repo=planned, env={"NO_COLOR": "", "FORCE_COLOR": "", **env})
    assert r.exit_code == 0, r.output
    assert "x will be started" in SGR.sub("", r.stdout)
    assert (ESC in r.stdout) is want


def _on_a_terminal(repo: Repo, env: dict[str, str], *args: str) -> str:
    """Run ``monitors plan`` with its stdout on a pseudo-terminal; return what it wrote."""
    leader, follower = pty.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    try:
        proc = subprocess.run(
            [console_script(), "--root", str(repo.root), "--state-dir", str(repo.state),
             "plan", *args], stdout=follower, stderr=subprocess.PIPE, timeout=60,
            env={**base, "TERM": "xterm", **env})
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
    assert proc.returncode == 0, proc.stderr
    return b"".join(chunks).decode()


@pytest.mark.parametrize(("env", "args", "want"), [
    ({}, (), True), ({"TERM": "dumb"}, (), False), ({"NO_COLOR": "1"}, (), False),
    ({}, ("--no-color",), False), ({"TERM": "dumb", "FORCE_COLOR": "1"}, (), True),
])
def test_plan_on_a_terminal(planned: Repo, env: dict[str, str], args: tuple[str, ...],
                            want: bool) -> None:
    out = _on_a_terminal(planned, env, *args)
    assert "x will be started" in SGR.sub("", out)
    assert (ESC in out) is want
