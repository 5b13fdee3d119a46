"""Text from a watched command, a monitor file or a path never drives the terminal: every
text view and the daemon's text log show control and bidi characters escaped
(``render.terminal``); ``--json`` keeps the exact text. The real daemon on a temp repository."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for

# anything that a terminal would obey: C0 but TAB/LF, DEL, C1, bidi overrides and isolates
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
RLO = "\u202e"


def test_text_views_and_daemon_log_escape_controls(repo: Repo,
                                                   daemons: Callable[..., Daemon]) -> None:
    # a (broken) file whose name has a right-to-left override, a description with an OSC
    # title, a command printing an OSC title and a bare CR, a run action printing an OSC 52
    # clipboard write, a notification carrying an erase-screen
    repo.write(f"monitors.d/bad{RLO}lmy.yml", "source: {type: poll}\n")
    repo.write("monitors.d/esc-run.yml", r"""
        description: "\e]0;pwn\a"
        source:
          type: poll
          command: 'printf "red\rfake ok \033]0;PWNED\007\n"'
          interval: 1s
        condition: {mode: every}
        action:
          type: run
          command: [sh, -c, 'printf "\033]52;c;SGVsbG8=\007\n"']
          prompt: "{{ event }}"
    """)
    repo.write("monitors.d/esc-notify.yml", r"""
        name: esc-notify
        source: {type: poll, command: 'printf "clear\033[2J\n"', interval: 1s}
        condition: {mode: every}
        action: {type: notify, message: "NOTIFY {{ event }}"}
    """)
    d = daemons().start()
    wait_for(lambda: any(f.get("status") == "succeeded" for f in d.fires("esc-run")),
             what="esc-run's action finished", log=d.log)
    wait_for(lambda: d.fires("esc-notify"), what="esc-notify fired", log=d.log)
    shown = {args: d.cli(*args) for args in (
        ("list",), ("view", "esc-run"), ("runs", "esc-run"), ("logs", "esc-run"),
        ("test", "esc-run"))}
    as_json = {args: d.cli(*args, "--json") for args in (
        ("list",), ("view", "esc-run"), ("runs", "esc-run"), ("logs", "esc-run"))}
    assert d.stop() == 0

    for args, result in shown.items():
        assert result.returncode == 0, (args, result.stderr)
        assert not RAW.findall(result.stdout + result.stderr), (args, result.stdout)
    assert "\\u202e" in shown[("list",)].stdout
    assert "\\x1b]0;pwn\\x07" in shown[("view", "esc-run")].stdout
    assert "red\\rfake ok \\x1b]0;PWNED\\x07" in shown[("runs", "esc-run")].stdout
    assert "\\x1b]52;c;SGVsbG8=\\x07" in shown[("logs", "esc-run")].stdout
    assert "red\\rfake ok \\x1b]0;PWNED\\x07" in shown[("test", "esc-run")].stdout
    log = d.log_text()
    assert "clear\\x1b[2J" in log
    assert not RAW.findall(log)
    # --json is exact: the control characters come back from the JSON as they were
    for args, result in as_json.items():
        assert result.returncode == 0, (args, result.stderr)
        assert "\x1b" not in result.stdout and "\r" not in result.stdout
        json.loads(result.stdout)
    assert "\\u001b]0;PWNED\\u0007" in as_json[("runs", "esc-run")].stdout
