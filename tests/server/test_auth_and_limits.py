"""Bearer token, open probes, size limits and garbage: 4xx answers, the daemon unaffected."""

from __future__ import annotations

import os
import socket
import stat

import httpx

from reconciler import tokens
from tests.conftest import run_cli
from tests.server.conftest import TOKEN, Peer


def test_every_endpoint_but_the_probes_needs_the_token(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[echo, hi]"})
    for path in ("/v1/status", "/v1/monitors", "/v1/fingerprints", "/metrics"):
        missing = p.get(path, token=None)
        assert missing.status_code == 401, path
        assert missing.headers["WWW-Authenticate"].startswith("Bearer")
        assert missing.json()["apiVersion"] == "v1"
        assert p.get(path, token="wrong-" + TOKEN).status_code == 401, path
        assert p.get(path).status_code == 200, path
    assert p.post("/v1/plan", token=None, json={"monitors": []}).status_code == 401
    health = p.get("/healthz", token=None).json()
    assert health["status"] == "ok" and health["headroom"] in ("ok", "low", "critical")
    assert p.get("/readyz", token=None).json() == {"apiVersion": "v1", "ready": True}


def test_a_daemon_without_a_token_refuses_all_but_the_probes(peers) -> None:
    p: Peer = peers("alpha", token=None)
    answer = p.get("/v1/status", token="anything")
    assert answer.status_code == 401
    assert "monitors token create" in answer.json()["error"]
    assert p.get("/healthz", token=None).status_code == 200


def test_oversized_body_is_413_and_garbage_is_400_and_the_daemon_goes_on(peers) -> None:
    p: Peer = peers("alpha", monitors={"tick": "[date, +%N]"})
    big = p.post("/v1/plan", content=b"x" * (2 << 20))
    assert big.status_code == 413
    assert big.json()["apiVersion"] == "v1"

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(40):
            yield b"y" * 65536

    chunked = p.post("/v1/plan", content=chunks())
    assert chunked.status_code == 413 and chunked.json()["apiVersion"] == "v1"
    assert p.post("/v1/plan", content=b"\xff\xfe not json").status_code == 400
    assert p.post("/v1/plan", json=[1, 2]).status_code == 400
    host, port = p.url.removeprefix("http://").rsplit(":", 1)
    for garbage in (b"\x16\x03\x01\x02\x00garbage\r\n\r\n", b"GET / HTTP/1.1\r\nHost\r\n\r\n",
                    b"BREW /pot HTCPCP/1.0\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(garbage)
            reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 400") or reply.startswith(b"HTTP/1.0 400"), reply
    before = p.liveness("tick").get("checkCount", 0)
    assert p.get("/v1/status").status_code == 200
    from tests.daemon.conftest import wait_for

    wait_for(lambda: p.liveness("tick").get("checkCount", 0) > before, what="still polling")
    assert p.proc is not None and p.proc.poll() is None
    assert "Traceback" not in p.log_text()


def test_a_connection_that_never_finishes_its_request_is_closed(peers) -> None:
    # slowloris: a partial request line held a connection (a file descriptor) open for
    # aiohttp's default hour; it is closed after [http] requestTimeout
    p: Peer = peers("alpha", start=False)
    p.repo.write("monitors.toml", '[http]\nrequestTimeout = "1s"\n')
    p.start()
    host, port = p.url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=8) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never the blank line
        assert s.recv(4096) == b""  # closed by the server, not the 8 s timeout
    with socket.create_connection((host, int(port)), timeout=8) as s:
        assert s.recv(4096) == b""  # silent after connecting: closed too


def test_token_create_writes_a_0600_file_and_the_daemon_uses_it(peers, repo) -> None:
    result = run_cli(["token", "create"], repo=repo)
    assert result.exit_code == 0, result.output
    path = repo.state / tokens.DEFAULT_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    token = path.read_text().strip()
    assert len(token) >= 40 and token not in result.output
    again = run_cli(["token", "create"], repo=repo)
    assert again.exit_code == 1 and "--force" in again.output
    assert run_cli(["token", "create", "--force"], repo=repo).exit_code == 0
    assert path.read_text().strip() != token


def test_a_token_file_others_can_read_is_refused_in_one_line(peers) -> None:
    p: Peer = peers("alpha", token=None, start=False)
    p.repo.write("monitors.toml", '[http]\ntokenFile = "secret.token"\n')
    os.chmod(p.repo.root / "monitors.toml", 0o644)
    secret = p.repo.write("secret.token", "abc-token\n")
    os.chmod(secret, 0o644)
    result = p.cli("run")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "must be mode 0600" in lines[0] and "chmod 600" in lines[0]
    os.chmod(secret, 0o600)
    p.start()
    assert p.get("/v1/status", token="abc-token").status_code == 200


def test_listen_in_use_is_one_line_and_exit_1(peers) -> None:
    first: Peer = peers("alpha")
    second: Peer = peers("beta", port=first.port, start=False)
    result = second.cli("run")
    assert result.returncode == 1
    assert "cannot listen" in result.stderr and "Traceback" not in result.stderr


def test_tls_serves_https(peers, tmp_path) -> None:
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        import pytest

        pytest.skip("openssl is not installed")
    p: Peer = peers("alpha", start=False)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(p.repo.root / "key.pem"),
                    "-out", str(p.repo.root / "cert.pem")], check=True, capture_output=True)
    p.repo.write("monitors.toml", '[http]\ncertFile = "cert.pem"\nkeyFile = "key.pem"\n')
    os.chmod(p.repo.root / "monitors.toml", 0o644)
    p.start()
    assert p.url.startswith("https://")
    answer = httpx.get(p.url + "/healthz", verify=False, timeout=10)
    assert answer.status_code == 200
