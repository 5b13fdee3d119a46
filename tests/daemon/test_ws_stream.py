"""A real daemon holding a ``ws`` connection to a local ``websockets`` server: frames are
evaluated and counted, ``list`` shows connected, then reconnecting with the last error."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

import pytest
from websockets.sync.server import Server, ServerConnection, serve

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


class Feed:
    """A threaded server sending ``hello`` then one frame per ``send``; ``stop`` drops all."""

    def __init__(self) -> None:
        self.server: Server = serve(self.handler, "127.0.0.1", 0)
        self.port = self.server.socket.getsockname()[1]
        self.conns: list[ServerConnection] = []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handler(self, conn: ServerConnection) -> None:
        self.conns.append(conn)
        conn.send("hello")
        for _ in conn:  # hold the connection until the peer or ``stop`` closes it
            pass

    def send(self, text: str) -> None:
        for conn in list(self.conns):
            conn.send(text)

    def stop(self) -> None:
        self.server.shutdown()
        for conn in list(self.conns):
            conn.close()


@pytest.fixture
def feed() -> Iterator[Feed]:
    f = Feed()
    yield f
    f.stop()


def test_ws_monitor_connects_evaluates_frames_and_reports_reconnecting(
        repo: Repo, daemons: Callable[..., Daemon], feed: Feed) -> None:
    repo.write("monitors.d/frames.yml", json.dumps({
        "source": {"type": "ws", "url": f"ws://127.0.0.1:{feed.port}/", "backoff": "200ms"},
        "condition": {"mode": "every"},
        "action": {"type": "notify", "message": "frame {{ event }}"}}))
    d = daemons().start()
    wait_for(lambda: d.fires("frames"), what="first frame fired", log=d.log)
    listing = d.cli("list")
    assert "connected" in listing.stdout and "never polled" not in listing.stdout, \
        listing.stdout
    feed.send("second")
    wait_for(lambda: len(d.fires("frames")) == 2, what="second frame", log=d.log)
    wait_for(lambda: d.liveness("frames").get("checkCount", 0) >= 1, what="frames counted",
             log=d.log)
    assert [f["event"]["observation"] for f in d.fires("frames")] == ["hello", "second"]
    feed.stop()
    wait_for(lambda: "reconnecting (" in d.cli("list").stdout, what="reconnecting shown",
             log=d.log)
