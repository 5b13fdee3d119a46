"""Secrets never reach disk or screen: the real daemon on a temp repository, sources and an
action that print secrets, then every file of the state directory, the daemon log and every
view are searched for them (README "Secrets")."""

from __future__ import annotations

import hashlib
import http.server
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.actions.records import OUTPUT_FILE
from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.helpers import http_server, reply

TOKEN = "s3cr3t-value"  # echoed by a poll command and a run action
HEADER = "h3ader-t0ken-42"  # sent as a poll-http header, echoed by the endpoint
SIGNING = "webhook-signing-key"  # only named by a secretEnv, echoed by a poll command
ROUTINE = "r0utine-only-token"  # only referenced by monitors.toml, echoed by a poll command
LATER = "added-after-start"  # referenced by a monitor added while the daemon runs
SECRETS = (TOKEN, HEADER, SIGNING, ROUTINE, LATER)


def echo_auth(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 200, f"auth={h.headers.get('Authorization')}".encode(),
          {"Content-Type": "text/plain; charset=utf-8"})


@pytest.fixture
def endpoint() -> Iterator[str]:
    with http_server({"/echo": echo_auth}) as url:
        yield url


def _setup(repo: Repo, endpoint: str) -> None:
    # ${MY_TOKEN} in a source's env: expanded for the child, registered as a secret; the
    # command prints it directly from the inherited environment and through X, on stdout,
    # on stderr, and long enough (> 256 characters) that the signature is a sha256.
    repo.write("monitors.d/leak-poll.yml", """
        name: leak-poll
        source:
          type: poll
          command: >-
            echo "x=$X token=$MY_TOKEN $ROUTINE_TOKEN $(printf %0300d 0)";
            echo "err $MY_TOKEN" >&2
          env: {X: "${MY_TOKEN}"}
          interval: 1s
        condition: {mode: match, match: 'x=.*'}
        action: {type: notify, message: "leak-poll saw {{ event }}"}
    """)
    repo.write("monitors.d/leak-http.yml", f"""
        name: leak-http
        source:
          type: poll-http
          url: {endpoint}/echo
          headers: {{Authorization: "Bearer ${{HDR_TOKEN}}"}}
          interval: 1s
        condition: {{mode: match, match: 'auth=Bearer .*'}}
        action:
          type: run
          command: [sh, -c, 'echo "prompt=$0 env=$MY_TOKEN hdr=$HDR_TOKEN"', "{{prompt}}"]
          prompt: "saw {{{{ event }}}}"
    """)
    # a check error whose message carries the stderr tail (exit 127), and a secret only
    # named by a secretEnv of a webhook-out action (never fired: the poll always fails)
    repo.write("monitors.d/leak-error.yml", """
        name: leak-error
        source:
          type: poll
          command: 'echo "cannot: $SIGNING_KEY $MY_TOKEN" >&2; exit 127'
          interval: 1s
        action:
          type: webhook-out
          url: http://127.0.0.1:9/never
          secretEnv: SIGNING_KEY
    """)
    repo.write("monitors.toml", """
        [routines.deploy]
        argv = ["true"]
        env = {DEPLOY = "${ROUTINE_TOKEN}"}
    """)


def _everything_on_disk(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_socket()}


def test_secrets_never_reach_state_logs_or_views(repo: Repo, endpoint: str,
                                                 daemons: Callable[..., Daemon],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    monkeypatch.setenv("HDR_TOKEN", HEADER)
    monkeypatch.setenv("SIGNING_KEY", SIGNING)
    monkeypatch.setenv("ROUTINE_TOKEN", ROUTINE)
    monkeypatch.setenv("LATER_TOKEN", LATER)
    _setup(repo, endpoint)
    d = daemons().start()
    wait_for(lambda: d.fires("leak-poll"), what="leak-poll fired", log=d.log)
    fires_dir = repo.state / "monitors" / "leak-http" / "fires"

    def run_done() -> bool:
        return any((f / OUTPUT_FILE).exists() and (read_json(f / "event.json") or {})
                   .get("status") == "succeeded" for f in fires_dir.glob("*"))

    wait_for(run_done, what="leak-http's run action finished", log=d.log)
    wait_for(lambda: d.liveness("leak-error").get("lastError"), what="leak-error's check error",
             log=d.log)
    wait_for(lambda: (repo.state / "notifications.log").exists(), what="notification",
             log=d.log)
    # registered on the reconcile that starts it, before its first poll
    repo.write("monitors.d/leak-later.yml", """
        name: leak-later
        source: {type: poll, command: 'echo "later=$LATER_TOKEN"', interval: 1s,
                 env: {L: "${LATER_TOKEN}"}}
        condition: {mode: every}
        action: {type: notify, message: "{{ event }}"}
    """)
    wait_for(lambda: d.fires("leak-later"), what="leak-later fired", log=d.log)

    views = [d.cli(*args) for args in (
        ("list",), ("list", "--json"), ("view", "leak-poll"), ("view", "leak-http", "--json"),
        ("view", "leak-error"), ("runs", "leak-http"), ("runs", "leak-poll", "--json"),
        ("logs", "leak-http"), ("logs", "leak-http", "--json"),
        ("test", "leak-poll"), ("test", "leak-http", "--json"), ("test", "leak-error"))]
    assert d.stop() == 0

    shown = {" ".join(v.args[-2:]): v.stdout + v.stderr for v in views}
    files = _everything_on_disk(repo.state)
    files[d.log] = d.log.read_bytes()
    for secret in SECRETS:
        assert [p for p, data in files.items() if secret.encode() in data] == [], secret
        assert [k for k, text in shown.items() if secret in text] == [], secret

    # what was recorded is the redacted text, so the views are useful, not empty
    event = d.fires("leak-poll")[0]["event"]
    assert event["observation"].startswith("x=*** token=*** *** 000")
    assert event["meta"]["stderrTail"] == "err ***\n"
    # the signature (a sha256: the key is long) is of the redacted text: the secret cannot
    # be recovered from it by trying candidates
    key = event["observation"].strip()
    assert d.state("leak-poll")["lastSignature"] == \
        "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    output = next(fires_dir.glob(f"*/{OUTPUT_FILE}")).read_text()
    assert output == "prompt=saw auth=Bearer *** env=*** hdr=***\n"
    assert "cannot: *** ***" in d.liveness("leak-error")["lastError"]
    listing = json.loads(shown["list --json"])
    assert {r["name"] for r in listing["monitors"]} == {"leak-poll", "leak-http", "leak-error",
                                                        "leak-later"}
    assert d.fires("leak-later")[0]["event"]["observation"] == "later=***\n"
    assert "NOTIFY leak-poll: leak-poll saw x=*** token=*** *** 000" in \
        (repo.state / "notifications.log").read_text()
