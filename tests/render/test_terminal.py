"""``render.terminal``: untrusted text is shown with its control and bidi characters
escaped in every text output (lint, plan and the daemon's text log here; the views in
tests/daemon/test_terminal_output.py), while our own colour still works."""

from __future__ import annotations

import io
import logging
import re

import pytest

from reconciler.daemon import logformat
from reconciler.render import terminal
from tests.conftest import Repo, run_cli

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize(("text", "shown"), [
    ("plain text\n\twith tab", "plain text\n\twith tab"),
    ("red\rfake ok", "red\\rfake ok"),
    ("\x1b]0;PWNED\x07", "\\x1b]0;PWNED\\x07"),
    ("\x1b]52;c;SGVsbG8=\x07", "\\x1b]52;c;SGVsbG8=\\x07"),
    ("a\x00b\x7fc\x9b2J", "a\\0b\\x7fc\\x9b2J"),
    ("file\u202egpj.exe \u2066x\u2069", "file\\u202egpj.exe \\u2066x\\u2069"),
    ("caf\u00e9 \u65e5\u672c", "caf\u00e9 \u65e5\u672c"),  # printable non-ASCII stays
])
def test_escape(text: str, shown: str) -> None:
    assert terminal.escape(text) == shown
    assert not RAW.search(terminal.escape(text))


def test_lint_text_escapes_a_file_name_json_stays_exact(repo: Repo) -> None:
    # a right-to-left override in a file name would show "...\u202egpj.yml" reversed
    repo.write("monitors.d/bad\u202egpj.yml", "source: {type: poll}\n")
    text = run_cli(["lint"], repo=repo)
    assert text.exit_code == 1
    assert "bad\\u202egpj.yml:1:1: error:" in text.stdout and not RAW.search(text.stdout)
    as_json = run_cli(["lint", "--json"], repo=repo)
    assert "bad\u202egpj.yml" in as_json.stdout  # bidi characters are fine in JSON


def test_plan_escapes_names_and_errors_and_keeps_colour(repo: Repo) -> None:
    repo.write("monitors.d/ok\u202egpj.yml", "source: {type: poll}\n")
    plain = run_cli(["plan", "--no-color"], repo=repo)
    assert "ok\\u202egpj" in plain.stdout and not RAW.search(plain.stdout)
    coloured = run_cli(["plan"], repo=repo, env={"FORCE_COLOR": "1", "NO_COLOR": ""})
    assert SGR.search(coloured.stdout), coloured.stdout  # our colour is still sent
    assert "ok\\u202egpj" in coloured.stdout
    assert not RAW.search(SGR.sub("", coloured.stdout))


def test_daemon_text_log_escapes_json_log_stays_exact() -> None:
    for fmt in ("text", "json"):
        out = io.StringIO()
        logformat.setup(stream=out, fmt=fmt)
        logging.getLogger("monitors.test").info("NOTIFY %s", "clear\x1b[2J\r\u202e")
        if fmt == "text":
            assert "NOTIFY clear\\x1b[2J\\r\\u202e" in out.getvalue()
            assert not RAW.search(out.getvalue())
        else:
            assert "clear\\u001b[2J\\r" in out.getvalue()
