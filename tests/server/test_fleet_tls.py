"""Fleet peers serving HTTPS (``[http] certFile``) with a self-signed certificate: the
fleet file's ``https://`` address and ``caFile`` reach them from ``list``, ``add``,
``plan --device`` and the ``device`` source; without ``caFile`` the verification
failure is one line naming the device and what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.daemon.conftest import wait_for
from tests.helpers import self_signed
from tests.server.conftest import Peer


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path / "pki")


def fleet_yaml(*entries: tuple[str, str | None, str | None]) -> str:
    """``devices:`` of ``(name, address, caFile)``."""
    lines = ["devices:"]
    for name, address, ca in entries:
        lines.append(f"  - name: {name}")
        if address:
            lines.append(f"    address: '{address}'")
        if ca:
            lines.append(f"    caFile: {ca}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def tls_pair(peers, certificate) -> tuple[Peer, Peer]:
    """alpha (plain HTTP) and beta (HTTPS, self-signed), both started; alpha's fleet file
    has beta at ``https://`` with ``caFile`` relative to the fleet file (``tls/beta.pem``)."""
    cert, key = certificate
    b: Peer = peers("beta", monitors={"on-beta": "[echo, b]"}, start=False)
    b.serve_tls(cert, key)
    b.start()
    a: Peer = peers("alpha", monitors={"on-alpha": "[echo, a]"})
    (a.repo.root / "tls").mkdir()
    shutil.copy(cert, a.repo.root / "tls" / "beta.pem")
    a.repo.write("fleet.yaml", fleet_yaml(("alpha", a.address, None),
                                          ("beta", f"https://{b.address}", "tls/beta.pem")))
    return a, b


def test_list_fans_out_to_a_tls_peer_trusted_through_its_ca_file(tls_pair) -> None:
    a, b = tls_pair
    assert b.url.startswith("https://")
    result = a.cli("list", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert sorted((r["device"], r["name"]) for r in doc["monitors"]) == [
        ("alpha", "on-alpha"), ("beta", "on-beta")]
    assert doc["unreachable"] == [] and doc["devices"] == ["alpha", "beta"]
    plan = a.cli("plan", "--device", "beta", "--json")
    assert plan.returncode == 0, plan.stderr
    assert {ch["name"]: ch["action"] for ch in json.loads(plan.stdout)["changes"]} == {
        "on-alpha": "start", "on-beta": "stop"}


def test_a_tls_peer_without_ca_file_is_unreachable_with_one_line_saying_what_to_do(
        tls_pair) -> None:
    a, b = tls_pair
    a.repo.write("fleet.yaml", fleet_yaml(("alpha", a.address, None),
                                          ("beta", f"https://{b.address}", None)))
    result = a.cli("list", "--json")
    assert result.returncode == 4, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["unreachable"] == [{"device": "beta", "error": (
        "certificate verify failed: self-signed certificate: set caFile for device beta "
        "in fleet.yaml to the PEM of the CA that signed its certificate (or to that "
        "certificate if self-signed)")}]
    assert [r["device"] for r in doc["monitors"]] == ["alpha"]
    text = a.cli("list")
    assert text.returncode == 4 and "Traceback" not in text.stderr
    assert "UNREACHABLE beta: certificate verify failed: self-signed certificate: set " \
           "caFile for device beta" in text.stdout
    # the address without its scheme: plain HTTP to a TLS server, and the hint to fix it
    a.repo.write("fleet.yaml", fleet_yaml(("alpha", a.address, None), ("beta", b.address, None)))
    plain = json.loads(a.cli("list", "--json").stdout)["unreachable"]
    assert plain == [{"device": "beta", "error": (
        "it closed the connection without answering: if it serves HTTPS ([http] certFile "
        f"there), write its address as https://{b.address} in fleet.yaml")}]


def test_a_ca_file_that_does_not_sign_the_peer_is_named(tls_pair, tmp_path) -> None:
    a, _b = tls_pair
    other, _ = self_signed(tmp_path / "other")
    shutil.copy(other, a.repo.root / "tls" / "beta.pem")
    doc = json.loads(a.cli("list", "--json").stdout)
    error = doc["unreachable"][0]["error"]
    assert error.startswith("certificate verify failed: ")
    assert "tls/beta.pem does not hold the CA that signed it (fix caFile for device beta " \
           "in fleet.yaml)" in error


def test_add_refuses_a_duplicate_that_runs_on_a_tls_peer(tls_pair) -> None:
    a, b = tls_pair
    assert b.cli("add", "original", "--poll", "echo q", "1m", "--notify").returncode == 0
    result = a.cli("add", "copy", "--poll", "echo q", "1m", "--notify")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "'original' on beta" in result.stderr
    assert not (a.repo.user / "copy.yml").exists()


def test_the_device_source_probes_a_tls_peer_over_https(peers, certificate) -> None:
    cert, key = certificate
    b: Peer = peers("beta", start=False)
    b.serve_tls(cert, key)
    b.start()
    a: Peer = peers("alpha", start=False)
    for name in ("beta", "beta-untrusted"):
        a.repo.write(f"monitors.d/watch-{name}.yml", f"""
            name: watch-{name}
            source:
              type: device
              device: {name}
              interval: 1s
            action:
              type: notify
              channel: log
            """)
    shutil.copy(cert, a.repo.root / "beta.pem")
    a.repo.write("fleet.yaml", fleet_yaml(
        ("alpha", None, None), ("beta", f"https://{b.address}", "beta.pem"),
        ("beta-untrusted", f"https://{b.address}", None)))
    a.start()
    state = wait_for(lambda: a.state("watch-beta"), what="the baseline", log=a.log)
    shown = json.dumps(state).replace("\\n", " ")
    assert "reachable headroom: " in shown and "unreachable" not in shown
    assert "headroom: unknown" not in shown  # the bucket came from beta's /healthz
    untrusted = wait_for(lambda: a.liveness("watch-beta-untrusted").get("lastError"),
                         what="the untrusted probe's check error", log=a.log)
    assert "tls: device 'beta-untrusted': certificate verify failed: self-signed " \
           "certificate: set caFile for device beta-untrusted in fleet.yaml" in untrusted
