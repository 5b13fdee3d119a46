"""Channel URLs checked at lint without sending, and ``monitors channels test NAME``
against a real loopback HTTP server (Apprise's ``json://`` channel)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from reconciler.actions import channels
from tests.actions.conftest import Receiver, refused_port
from tests.conftest import Repo, console_script, run_cli
from tests.helpers import endless_server

GOOD = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"


@pytest.mark.parametrize("url", [
    "ntfy://ntfy.sh/${NTFY_TOPIC}", "tgram://${BOT_TOKEN}/${CHAT_ID}", "json://127.0.0.1:9/",
    "mailto://${USER}:${PASS}@gmail.com", "slack://${A}/${B}/${C}", "json://${HOST}:${PORT}/",
])
def test_urls_apprise_parses_pass_with_placeholders(url: str) -> None:
    assert channels.url_problem(url) is None


@pytest.mark.parametrize(("url", "message"), [
    ("foo://bar", "unknown Apprise scheme 'foo'"),
    ("ntfi://ntfy.sh/x", "unknown Apprise scheme 'ntfi' (did you mean 'ntfy'?)"),
    ("ntfy.sh/topic", "not an Apprise URL: expected SCHEME://..."),
    ("tgram://not-a-token/", "Apprise cannot parse it: Unparseable Telegram URL"),
])
def test_urls_apprise_refuses_are_errors(url: str, message: str) -> None:
    check = channels.url_problem(url)
    assert check is not None and check.severity == "error"
    assert check.message.startswith(message)


def test_placeholders_apprise_cannot_fit_are_info_not_error() -> None:
    check = channels.url_problem("twilio://${SID}:${TOKEN}@${FROM}/${TO}")
    assert check is not None and check.severity == "info"
    assert "monitors channels test" in check.message


def test_lint_reports_a_bad_channel_url_at_its_position(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text(
        '[channels.ok]\nurl = "ntfy://ntfy.sh/${TOPIC}"\n\n[channels.phone]\n'
        'timeout = "5s"\nurl = "foo://bar"\n')
    r = run_cli(["lint", "--format", "json"], repo=repo)
    assert r.exit_code == 1
    [row] = json.loads(r.stdout)
    assert (row["line"], row["column"], row["field"], row["rule"], row["severity"]) == (
        6, 7, "channels.phone.url", "channel-url", "error")
    assert row["message"] == "unknown Apprise scheme 'foo'"


def test_a_bad_url_is_reported_beside_other_settings_problems(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text('devce = "x"\n[channels.phone]\nurl = "foo://bar"\n')
    r = run_cli(["lint", "--format", "json"], repo=repo)
    assert {(row["field"], row["rule"]) for row in json.loads(r.stdout)} == {
        ("devce", "unknown-field"), ("channels.phone.url", "channel-url")}


def _channel(repo: Repo, url: str) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text(
        f'[channels.hook]\nurl = "{url}"\ntimeout = "5s"\n')


def test_channels_test_sends_one_message(repo: Repo, receiver: Receiver) -> None:
    _channel(repo, receiver.url.replace("http://", "json://"))
    r = run_cli(["channels", "test", "hook"], repo=repo)
    assert (r.exit_code, r.stdout) == (0, "hook: sent a test message\n"), r.output
    [got] = receiver.wait_for(1)
    body = json.loads(got.body)
    assert body["title"] == "monitors: channel test" and "channels test hook" in body["message"]


def test_channels_test_prints_the_http_status_of_a_failure(repo: Repo,
                                                          receiver: Receiver) -> None:
    receiver.script = [(503, {})]
    _channel(repo, receiver.url.replace("http://", "json://"))
    r = run_cli(["channels", "test", "hook"], repo=repo)
    assert r.exit_code == 1
    assert r.stdout.startswith("hook: failed (HTTP 503): "), r.output
    assert len(receiver.wait_for(1)) == 1  # one attempt, no retries
    receiver.script = [(500, {})]
    r = run_cli(["channels", "test", "hook", "--json"], repo=repo)
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert (out["channel"], out["ok"], out["status"]) == ("hook", False, 500)


def test_channels_test_connection_refused_and_unknown_names(repo: Repo) -> None:
    _channel(repo, f"json://127.0.0.1:{refused_port()}/")
    r = run_cli(["channels", "test", "hook"], repo=repo)
    assert r.exit_code == 1 and r.stdout.startswith("hook: failed: ")
    assert "Connection error" in r.stdout
    r = run_cli(["channels", "test", "nope"], repo=repo)
    assert r.exit_code == 1
    assert r.stderr == "error: no channel 'nope' in monitors.toml (known: hook, log)\n"


def test_channels_test_expands_and_redacts_the_environment(repo: Repo,
                                                           receiver: Receiver) -> None:
    port = receiver.url.split(":")[2].split("/")[0]
    _channel(repo, "json://127.0.0.1:${HOOK_PORT}/${HOOK_SECRET}")
    r = run_cli(["channels", "test", "hook"], repo=repo)
    assert r.exit_code == 1
    assert r.stderr == "error: hook: environment variable HOOK_PORT is not set\n"
    receiver.script = [(500, {})]
    r = run_cli(["channels", "test", "hook"], repo=repo,
                env={"HOOK_PORT": port, "HOOK_SECRET": "s3cr3t-path"})
    assert r.exit_code == 1 and "(HTTP 500)" in r.stdout
    assert receiver.wait_for(1)[0].path == "/s3cr3t-path"
    assert "s3cr3t-path" not in r.output


def test_cached_answers_report_the_same_and_a_broken_cache_is_ignored(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text('[channels.phone]\nurl = "ntfi://x"\n')
    first = run_cli(["lint"], repo=repo)
    assert "unknown Apprise scheme 'ntfi' (did you mean 'ntfy'?) [channel-url]" in first.stdout
    assert channels.cache_path().is_file()
    assert run_cli(["lint"], repo=repo).stdout == first.stdout  # from the cache
    channels.cache_path().write_text("{not json")
    assert run_cli(["lint"], repo=repo).stdout == first.stdout


def test_channels_test_against_an_endless_answer_ends_at_the_timeout(repo: Repo) -> None:
    # Apprise reads the whole answer and sends from its own thread pool, which Python
    # joins at exit: before, the command reported at 2s and then hung, reading, until
    # the server stopped (4 GB in 9 s against an unthrottled one)
    with endless_server() as url:
        (repo.root / "monitors.toml").write_text(
            f'[channels.big]\nurl = "{url.replace("http://", "json://")}/"\ntimeout = "2s"\n')
        started = time.monotonic()
        r = subprocess.run([console_script(), "--root", str(repo.root), "channels", "test",
                            "big"], capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    assert (r.returncode, r.stdout) == (1, "big: failed: no answer within 2s\n"), r.stderr
    assert took < 6
