"""``monitors run --log-level`` and ``--log-format json`` (issue 9 §8)."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Callable

from reconciler.daemon import logformat
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def test_log_format_json_is_one_object_a_line(repo: Repo,
                                              daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/a.yml", monitor_yaml("a", "[echo, hi]"))
    repo.write("monitors.d/bad.yml", "name: bad\nsource: [\n")  # an ERROR line
    d = daemons("--log-format", "json").start(wait_ready=False)
    wait_for(lambda: '"daemon ready' in d.log_text(), what="daemon ready", log=d.log)
    assert d.stop() == 0
    lines = d.log_text().splitlines()
    docs = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(set(doc) == {"time", "level", "logger", "message"} for doc in docs), docs
    ready = next(doc for doc in docs if doc["message"].startswith("daemon ready"))
    assert ready["level"] == "info" and ready["logger"] == "monitors.daemon"
    assert ready["time"].endswith("Z") and ready["time"][10] == "T"
    assert any(doc["level"] == "error" and "bad.yml" in doc["message"] for doc in docs)


def test_log_level_warning_drops_info_lines(repo: Repo,
                                            daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/bad.yml", "name: bad\nsource: [\n")
    d = daemons("--log-level", "warning").start(wait_ready=False)
    wait_for(lambda: "bad.yml" in d.log_text(), what="the error line", log=d.log)
    assert d.stop() == 0
    text = d.log_text()
    assert " ERROR " in text and " INFO " not in text, text


def test_json_formatter_keeps_a_multiline_message_and_traceback_on_one_line() -> None:
    out = io.StringIO()
    root = logging.getLogger("monitors")
    saved = root.handlers[:], root.level, root.propagate
    logformat.setup(stream=out, fmt="json", level="debug")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("monitors.test").exception("two\nlines")
    finally:
        root.handlers[:], root.level, root.propagate = saved
    line, = out.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["message"] == "two\nlines" and doc["level"] == "error"
    assert "ValueError: boom" in doc["exception"]


def test_json_formatter_keeps_a_traceback_the_redacting_filter_turned_into_text() -> None:
    """The daemon's log filter (``redaction.filter_logs``) redacts a traceback into
    ``exc_text`` and drops ``exc_info``: the JSON line must still carry it, redacted."""
    from reconciler import redaction

    out = io.StringIO()
    root = logging.getLogger("monitors")
    saved = root.handlers[:], root.level, root.propagate
    logformat.setup(stream=out, fmt="json", level="debug")
    redaction.filter_logs(redaction.Redactor(["tok-3141592"]))
    try:
        raise ValueError("bad token tok-3141592")
    except ValueError:
        logging.getLogger("monitors.test").exception("failed")
    finally:
        root.handlers[:], root.level, root.propagate = saved
        redaction.filter_logs(redaction.Redactor())  # lastResort keeps a filter: empty it
    doc = json.loads(out.getvalue().splitlines()[0])
    assert "ValueError: bad token ***" in doc["exception"]
    assert "tok-3141592" not in out.getvalue()


def test_log_names_the_monitors_that_changed_not_temp_files(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/base.yml", monitor_yaml("base", "[echo, base]"))
    d = daemons().start()
    wait_for(lambda: "base" in d.running(), what="base running", log=d.log)
    # like `sed -i`: write a temp file with no suffix, then rename it over the target
    temp = repo.user / "sedLw5Di2"
    temp.write_text(monitor_yaml("fresh", "[echo, fresh]"))
    os.replace(temp, repo.user / "fresh.yml")
    wait_for(lambda: "fresh" in d.running(), what="fresh started", log=d.log)
    wait_for(lambda: "reconciled (file change): started fresh; generation" in d.log_text(),
             what="reconciled line naming fresh", log=d.log)
    reconciled = [line for line in d.log_text().splitlines() if "reconciled" in line]
    assert not any("sedLw5Di2" in line or "monitors.d/" in line for line in reconciled), \
        reconciled
    assert d.stop() == 0


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
