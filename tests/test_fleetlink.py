"""``reconciler.fleetlink`` against real TLS servers on 127.0.0.1: a peer verified with
its ``caFile``, and one line for each way TLS fails (untrusted, wrong name, plain HTTP
at an ``https://`` address); TLS contexts made once per CA file version."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reconciler import errors, fleetlink
from reconciler.fleet import Device
from reconciler.model import DeviceName
from tests.helpers import http_server, reply, self_signed

HEALTHZ = b'{"apiVersion": "v1", "headroom": "ok"}'


def healthz(handler) -> None:  # type: ignore[no-untyped-def]
    reply(handler, 200, HEALTHZ, {"Content-Type": "application/json"})


def serving(cert: Path, key: Path) -> ssl.SSLContext:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    return tls


@pytest.fixture
def tls_peer(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS server with a self-signed certificate for 127.0.0.1: (host:port, cert)."""
    cert, key = self_signed(tmp_path / "pki")
    with http_server({"/healthz": healthz}, tls=serving(cert, key)) as url:
        yield url.removeprefix("https://"), cert


def get(link: fleetlink.Link) -> httpx.Response:
    return httpx.get(link.url("/healthz"), verify=link.verify(), timeout=5, trust_env=False)


def untrusted_line(link: fleetlink.Link) -> str | None:
    with pytest.raises(httpx.ConnectError) as e:
        get(link)
    return fleetlink.failure(link, e.value)


def test_a_peer_is_verified_against_its_ca_file(tls_peer) -> None:
    address, cert = tls_peer
    link = fleetlink.link(Device(DeviceName("beta"), f"https://{address}", ca_file=cert))
    assert link.url("/healthz") == f"https://{address}/healthz"
    assert get(link).content == HEALTHZ


def test_a_self_signed_peer_without_ca_file_says_to_set_it(tls_peer) -> None:
    address, _ = tls_peer
    link = fleetlink.link(Device(DeviceName("beta"), f"https://{address}"),
                          fleet_file="fleet.yml")
    assert untrusted_line(link) == (
        "certificate verify failed: self-signed certificate: set caFile for device beta in "
        "fleet.yml to the PEM of the CA that signed its certificate (or to that "
        "certificate if self-signed)")


def test_a_certificate_for_another_address_is_named_a_mismatch(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path / "pki", ip="127.0.0.2")
    with http_server({"/healthz": healthz}, tls=serving(cert, key)) as url:
        link = fleetlink.link(Device(DeviceName("beta"), url, ca_file=cert))
        assert untrusted_line(link) == (
            "certificate verify failed: IP address mismatch, certificate is not valid for "
            "'127.0.0.1': address device beta in fleet.yaml by a name or IP address its "
            "certificate holds (subjectAltName)")


def test_https_to_a_plain_http_server_is_a_handshake_failure() -> None:
    with http_server({"/healthz": healthz}) as url:
        link = fleetlink.link(Device(DeviceName("beta"), url.replace("http:", "https:")))
        line = untrusted_line(link)
    assert line is not None and line.startswith("TLS handshake failed: ")
    assert line.endswith("does it serve HTTPS ([http] certFile there)? plain HTTP is "
                         "written host:port in fleet.yaml")


def test_a_context_is_made_once_per_ca_file_version(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path / "pki")
    one = Device(DeviceName("a"), "https://h:1", ca_file=cert)
    two = Device(DeviceName("b"), "https://h:2", ca_file=cert)
    first = fleetlink.link(one).verify()
    assert fleetlink.link(two).verify() is first
    system = fleetlink.link(Device(DeviceName("c"), "https://h:3")).verify()
    assert system is not first
    assert fleetlink.link(Device(DeviceName("d"), "h:4")).verify() is system
    assert first.check_hostname and first.verify_mode == ssl.CERT_REQUIRED
    st = cert.stat()
    os.utime(cert, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a new CA file
    assert fleetlink.link(one).verify() is not first
    cert.unlink()
    with pytest.raises(errors.ConfigError, match=r"^device a: caFile .*cert.pem: cannot "
                                                 r"read it: No such file or directory$"):
        fleetlink.link(one).verify()
    with pytest.raises(ValueError, match=r"has no address in fleet\.yaml"):
        fleetlink.link(Device(DeviceName("e")))
