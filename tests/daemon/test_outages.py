"""Outages and recoveries are events, with the real daemon: a ``poll-http`` monitor on a
real loopback server that stops and starts again; its ``webhook-out`` action (a second
real server) hears the outage once and the recovery as a change."""

from __future__ import annotations

import http.server
import textwrap
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.helpers import free_port, json_receiver


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Health:
    """A GET /health server on a fixed port that can stop and start again.

    ``stop`` waits for the next request to be answered and then closes the listening
    socket within milliseconds (``poll_interval``), so no poll is caught in the accept
    backlog mid-shutdown (that poll would see a reset, ``error: http: ... ReadError``,
    a second signature, before the refusals)."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: _Server | None = None
        self._answered = threading.Event()

    def start(self) -> None:
        answered = self._answered

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                answered.set()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), H)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                         daemon=True).start()

    def stop(self, *, after_answer: bool = True) -> None:
        if self._server is not None:
            if after_answer:
                self._answered.clear()
                self._answered.wait(10)
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def health() -> Iterator[Health]:
    h = Health()
    h.start()
    yield h
    h.stop(after_answer=False)


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver: the URL and the JSON bodies POSTed to it, in order."""
    with json_receiver() as received:
        yield received


def write_site(repo: Repo, health: Health, hook: str, *, condition: str = "") -> None:
    """``monitors.d/site.yml``: ``health``'s /health every 500ms (timeout 2s), a
    webhook-out to ``hook``, and ``condition`` (YAML text of the mapping, flow or block)
    when given."""
    text = (f'name: site\n'
            f'source: {{type: poll-http, url: "http://127.0.0.1:{health.port}/health", '
            f'interval: 500ms, timeout: 2s}}\n'
            f'action: {{type: webhook-out, url: "{hook}"}}\n')
    if condition:
        body = textwrap.dedent(condition).strip("\n")
        text += ("condition: " + body if body.startswith("{")
                 else "condition:\n" + textwrap.indent(body, "  ")) + "\n"
    repo.write("monitors.d/site.yml", text)


def test_an_outage_fires_once_and_the_recovery_is_a_change(
        repo: Repo, daemons: Callable[..., Daemon], health: Health,
        receiver: tuple[str, list[dict[str, Any]]]) -> None:
    hook, heard = receiver
    write_site(repo, health, hook)
    d = daemons().start()
    wait_for(lambda: d.state("site").get("baseline") == "200\nok", what="baseline", log=d.log)

    health.stop()
    wait_for(lambda: heard, what="the outage event", log=d.log)
    outage = heard[0]
    assert outage["observation"].startswith("error: connect: ")
    assert outage["reason"] == "changed"
    # a lasting outage keeps one signature: more failed checks, no second event
    wait_for(lambda: d.liveness("site").get("consecutiveErrors", 0) >= 4,
             what="four failed checks", log=d.log)
    assert len(heard) == 1
    assert d.liveness("site")["lastError"].startswith("connect: ")  # still a failed check

    health.start()
    wait_for(lambda: len(heard) >= 2, what="the recovery event", log=d.log)
    recovery = heard[1]
    assert (recovery["observation"], recovery["reason"]) == ("200\nok", "changed")
    wait_for(lambda: d.liveness("site").get("consecutiveErrors") == 0,
             what="a good check", log=d.log)
    assert len(heard) == 2
    assert d.stop() == 0


def test_with_on_error_ignore_an_outage_is_only_a_check_error(
        repo: Repo, daemons: Callable[..., Daemon], health: Health,
        receiver: tuple[str, list[dict[str, Any]]]) -> None:
    hook, heard = receiver
    write_site(repo, health, hook, condition="{onError: ignore}")
    d = daemons().start()
    wait_for(lambda: d.state("site").get("baseline") == "200\nok", what="baseline", log=d.log)
    health.stop()
    wait_for(lambda: d.liveness("site").get("consecutiveErrors", 0) >= 3,
             what="three failed checks", log=d.log)
    health.start()
    wait_for(lambda: d.liveness("site").get("consecutiveErrors") == 0,
             what="a good check", log=d.log)
    assert heard == []
    assert d.stop() == 0


def test_an_episode_survives_a_restart_and_resolves_with_kind_resolved(
        repo: Repo, daemons: Callable[..., Daemon], health: Health,
        receiver: tuple[str, list[dict[str, Any]]]) -> None:
    hook, heard = receiver
    write_site(repo, health, hook, condition="""
          mode: match
          match: '^error: '
          fireAfter: {consecutive: 2}
          resolve: true""")
    d = daemons().start()
    wait_for(lambda: d.liveness("site").get("checkCount", 0) >= 1, what="a check", log=d.log)
    health.stop()
    wait_for(lambda: heard, what="the outage event", log=d.log)
    assert (heard[0]["kind"], heard[0]["reason"]) == ("fired", "matched new signature")
    assert d.state("site")["episode"]["open"] is True
    assert d.stop() == 0

    # a restart during the outage: the open episode is kept, nothing fires again
    d2 = daemons(log_name="daemon-2.log").start()
    checks = d2.liveness("site").get("checkCount", 0)
    wait_for(lambda: d2.liveness("site").get("checkCount", 0) >= checks + 3,
             what="three checks after the restart", log=d2.log)
    assert len(heard) == 1

    health.start()
    wait_for(lambda: len(heard) >= 2, what="the resolve notice", log=d2.log)
    resolved = heard[1]
    assert (resolved["kind"], resolved["reason"]) == ("resolved", "resolved")
    assert resolved["signature"] == heard[0]["signature"]
    assert resolved["observation"] == "200\nok"
    assert d2.stop() == 0
