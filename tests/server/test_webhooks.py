"""Signed webhook deliveries to a real daemon over loopback: verified, refused, replayed,
spooled before the answer, evaluated by the matching monitors."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from reconciler.client import control
from reconciler.sources import webhook
from reconciler.state import deliveries
from tests.daemon.conftest import wait_for
from tests.server.conftest import Peer

SECRET = "s3cret-for-webhooks"
LINEAR_SECRET = "linear-s3cret"


def hook_monitor(name: str, provider: str, events: list[str], *, select: str | None = None,
                 secret_env: str | None = None) -> str:
    source: dict[str, Any] = {"type": "webhook", "provider": provider, "events": events}
    if secret_env:
        source["secretEnv"] = secret_env
    if select:
        source["select"] = select
    return json.dumps({"name": name, "source": source, "condition": {"mode": "every"},
                       "action": {"type": "notify", "message": name + " got {{ event }}"}})


def start(peers: Callable[..., Peer], monitors: dict[str, str]) -> Peer:
    peer = peers("hooks", start=False)
    for name, text in monitors.items():
        peer.repo.write(f"monitors.d/{name}.yml", text)
    peer.env.update({"GITHUB_WEBHOOK_SECRET": SECRET, "LINEAR_WEBHOOK_SECRET": LINEAR_SECRET,
                     "GENERIC_SECRET": SECRET})
    peer.start()
    return peer


def restart(peer: Peer, *, kill: bool = False) -> None:
    """Stop (SIGTERM, or SIGKILL with ``kill``) and start ``peer`` again, serving."""
    if kill:
        assert peer.proc is not None
        peer.proc.kill()
        peer.proc.wait(timeout=10)
    else:
        peer.stop()
    peer.start()
    wait_for(lambda: (control.status(peer.repo.state) or {}).get("endpoints", {}).get("http"),
             what="serving again", log=peer.log)


def github(peer: Peer, event: str, payload: dict[str, Any] | bytes, *,
           delivery: str | None = None, secret: str = SECRET,
           signature: str | None = None) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
               "Content-Type": "application/json",
               "X-Hub-Signature-256": signature or "sha256=" + webhook.signature(secret, body)}
    return httpx.post(peer.url + "/hooks/github", content=body, headers=headers, timeout=10)


def test_github_documented_example_signature() -> None:
    """GitHub's example: https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries"""
    header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert webhook.signature_ok("github", "It's a Secret to Everybody", b"Hello, World!",
                                header)
    assert not webhook.signature_ok("github", "It's a Secret to Everybody", b"Hello, World?",
                                    header)
    assert not webhook.signature_ok("github", "another secret", b"Hello, World!", header)
    assert not webhook.signature_ok("github", "It's a Secret to Everybody", b"Hello, World!",
                                    header.replace("sha256=", "sha1="))


def test_signed_delivery_fires_matching_monitors_only(peers: Callable[..., Peer]) -> None:
    peer = start(peers, {
        "prs": hook_monitor("prs", "github", ["pull_request"], select="pull_request.title"),
        "closed": hook_monitor("closed", "github", ["pull_request.closed"]),
        "pushes": hook_monitor("pushes", "github", ["push"]),
    })
    started = time.monotonic()
    r = github(peer, "pull_request", {"action": "opened", "pull_request": {"title": "Fix it"}})
    assert time.monotonic() - started < 5
    assert r.status_code == 200, r.text
    assert r.json()["monitors"] == ["prs"]
    wait_for(lambda: peer.fires("prs"), what="prs fired", log=peer.log)
    assert peer.fires("prs")[0]["event"]["observation"] == "Fix it"
    r = github(peer, "pull_request", {"action": "closed", "pull_request": {"title": "Fix"}})
    assert sorted(r.json()["monitors"]) == ["closed", "prs"]
    wait_for(lambda: len(peer.fires("prs")) == 2 and peer.fires("closed"), what="both fired",
             log=peer.log)
    assert peer.fires("pushes") == []
    listing = peer.cli("list")
    assert "never polled" not in listing.stdout, listing.stdout


def test_refusals_are_401_without_an_event(peers: Callable[..., Peer]) -> None:
    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    listing = peer.cli("list").stdout
    assert "waiting for a delivery" in listing and "never polled" not in listing, listing
    body = json.dumps({"action": "opened"}).encode()
    tampered = github(peer, "pull_request", body,
                      signature="sha256=" + webhook.signature(SECRET, body + b" "))
    assert tampered.status_code == 401
    wrong = github(peer, "pull_request", body, secret="not the secret")
    assert wrong.status_code == 401
    unsigned = httpx.post(peer.url + "/hooks/github", content=body,
                          headers={"X-GitHub-Event": "pull_request"}, timeout=10)
    assert unsigned.status_code == 401
    assert "error" in unsigned.json()
    unknown = httpx.post(peer.url + "/hooks/linear", content=body,
                         headers={"Linear-Signature": webhook.signature(SECRET, body)},
                         timeout=10)
    assert unknown.status_code == 401  # no linear monitor: no secret known
    assert "secret" in unknown.json()["error"]
    time.sleep(0.5)
    assert peer.fires("prs") == []
    metrics = peer.get("/metrics").text
    assert 'monitors_webhook_deliveries_total{outcome="bad-signature",provider="github"} 2.0' \
        in metrics
    assert SECRET not in peer.log_text()
    assert '"action"' not in peer.log_text()  # refusals are logged without the body


def test_replayed_delivery_id_is_200_without_a_second_event(
        peers: Callable[..., Peer]) -> None:
    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    payload = {"action": "opened", "number": 1}
    assert github(peer, "pull_request", payload, delivery="d-1").status_code == 200
    wait_for(lambda: peer.fires("prs"), what="fired", log=peer.log)
    again = github(peer, "pull_request", payload, delivery="d-1")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    restart(peer)  # the window is persisted
    assert github(peer, "pull_request", payload, delivery="d-1").json()["duplicate"] is True
    time.sleep(0.5)
    assert len(peer.fires("prs")) == 1


def test_an_overlong_delivery_id_is_refused_before_the_window_keeps_it(
        peers: Callable[..., Peer]) -> None:
    # an 8,000-character id was stored as is in the replay window (and logged)
    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    long_id = "x" * 8000
    answer = github(peer, "pull_request", {"action": "opened"}, delivery=long_id)
    assert answer.status_code == 400 and "longer than 200" in answer.json()["error"]
    time.sleep(0.5)
    assert peer.fires("prs") == []
    kept = [p for p in peer.repo.state.rglob("*") if p.is_file()
            and long_id.encode() in p.read_bytes()]
    assert kept == []
    assert long_id not in peer.log.read_text(errors="replace")


def test_oversized_body_is_413(peers: Callable[..., Peer]) -> None:
    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    big = b"x" * (25 * 1024 * 1024 + 1)
    r = httpx.post(peer.url + "/hooks/github", content=big, timeout=30,
                   headers={"X-GitHub-Event": "pull_request"})
    assert r.status_code == 413

    def chunks() -> Any:
        for _ in range(26):
            yield b"y" * (1024 * 1024)

    r = httpx.post(peer.url + "/hooks/github", content=chunks(), timeout=30,
                   headers={"X-GitHub-Event": "pull_request",
                            "X-Hub-Signature-256": "sha256=00"})  # signed: the body is read
    assert r.status_code == 413
    assert 'outcome="too-large"' in peer.get("/metrics").text


def test_linear_signature_and_stale_timestamp(peers: Callable[..., Peer]) -> None:
    peer = start(peers, {"issues": hook_monitor("issues", "linear", ["Issue"])})

    def send(stamp_ms: float) -> httpx.Response:
        body = json.dumps({"type": "Issue", "action": "create", "data": {"id": "X"},
                           "webhookTimestamp": int(stamp_ms)}).encode()
        return httpx.post(peer.url + "/hooks/linear", content=body, timeout=10, headers={
            "Linear-Signature": webhook.signature(LINEAR_SECRET, body),
            "Linear-Delivery": str(uuid.uuid4()), "Linear-Event": "Issue"})

    assert send((time.time() - 300) * 1000).status_code == 401
    assert peer.fires("issues") == []
    assert send(time.time() * 1000).status_code == 200
    wait_for(lambda: peer.fires("issues"), what="issue fired", log=peer.log)


def test_linear_timestamp_window_uses_the_clock() -> None:
    now = 1_700_000_000.0
    assert webhook.linear_fresh({"webhookTimestamp": now * 1000 - 59_000}, now)
    assert not webhook.linear_fresh({"webhookTimestamp": now * 1000 - 61_000}, now)
    assert not webhook.linear_fresh({"webhookTimestamp": now * 1000 + 61_000}, now)
    assert not webhook.linear_fresh({}, now)


def test_generic_route_uses_the_monitors_own_secret(peers: Callable[..., Peer]) -> None:
    peer = start(peers, {"gen": hook_monitor("gen", "generic", ["*"],
                                             secret_env="GENERIC_SECRET")})
    body = b'{"status": "red"}'
    url = peer.url + "/hooks/generic/gen"
    ok = httpx.post(url, content=body, timeout=10, headers={
        "X-Monitors-Signature-256": "sha256=" + webhook.signature(SECRET, body)})
    assert ok.status_code == 200, ok.text
    wait_for(lambda: peer.fires("gen"), what="generic fired", log=peer.log)
    other = httpx.post(peer.url + "/hooks/generic/nope", content=body, timeout=10, headers={
        "X-Monitors-Signature-256": "sha256=" + webhook.signature(SECRET, body)})
    assert other.status_code == 404


def test_kill_after_the_answer_fires_after_restart_once(peers: Callable[..., Peer]) -> None:
    """SIGKILL right after the 200: the event fires once (before the kill, or from the
    spool after the restart), never twice and never not at all."""
    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    assert github(peer, "pull_request", {"action": "opened"}).status_code == 200
    restart(peer, kill=True)
    wait_for(lambda: len(peer.fires("prs")) == 1, what="fired once", log=peer.log)
    wait_for(lambda: not list((peer.repo.state / "hooks" / "pending").glob("*.delivery")),
             what="spool emptied", log=peer.log)
    time.sleep(0.5)
    assert len(peer.fires("prs")) == 1


def test_a_spooled_delivery_is_evaluated_when_the_daemon_starts(
        peers: Callable[..., Peer]) -> None:
    """What a kill left in the spool (written before the 200) fires after the restart."""
    peer = peers("hooks", start=False)
    peer.repo.write("monitors.d/prs.yml", hook_monitor("prs", "github", ["pull_request"]))
    peer.env["GITHUB_WEBHOOK_SECRET"] = SECRET
    spool = deliveries.DeliveryLog(peer.repo.state)
    spool.spool(deliveries.Spooled(provider="github", event="pull_request", action="opened",
                                   delivery="crash-1", monitors=("prs",),
                                   received_at=time.time(), body=b'{"action": "opened"}'))
    peer.start()
    wait_for(lambda: len(peer.fires("prs")) == 1, what="fired after start", log=peer.log)
    wait_for(lambda: not list((peer.repo.state / "hooks" / "pending").glob("*.delivery")),
             what="spool emptied", log=peer.log)
    restart(peer)
    time.sleep(0.5)
    assert len(peer.fires("prs")) == 1
    assert github(peer, "pull_request", b'{"action": "opened"}',
                  delivery="crash-1").json()["duplicate"] is True


def test_a_delivery_refused_by_its_headers_is_answered_before_its_body(
        peers: Callable[..., Peer]) -> None:
    """An unknown generic monitor (404) or a missing signature header (401) is answered
    at once: the daemon does not first read up to 25 MiB from an unauthenticated
    sender (here the body never comes: reading it would wait for requestTimeout)."""
    import socket

    peer = start(peers, {"prs": hook_monitor("prs", "github", ["pull_request"])})
    host, port = peer.url.removeprefix("http://").rsplit(":", 1)
    for path, status in (("/hooks/generic/nope", b"404"), ("/hooks/github", b"401")):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\n"
                         f"Content-Length: {20 * 1024 * 1024}\r\n\r\n{{".encode())
            sock.settimeout(3)
            answer = sock.recv(4096)
        assert answer.split(b" ")[1] == status, answer
    assert peer.fires("prs") == []
