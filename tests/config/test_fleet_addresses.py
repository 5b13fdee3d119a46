"""A fleet device's ``address`` (``host:port`` or ``http(s)://host[:port]``) and
``caFile``: parsed by ``fleet.parse_address``, checked by lint with positions
(``bad-address``, ``ca-file``) and refused by ``fleet.load`` in one line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from reconciler import errors, fleet
from reconciler.config import settings_check
from tests.helpers import self_signed


@pytest.mark.parametrize(("address", "endpoint"), [
    ("10.0.0.2:8765", ("http", "10.0.0.2", 8765)),  # no scheme: plain HTTP, as always
    ("[::1]:8765", ("http", "::1", 8765)),
    ("https://box.lan:8765", ("https", "box.lan", 8765)),
    ("HTTPS://box.lan/", ("https", "box.lan", 443)),  # the scheme's port
    ("http://box.lan", ("http", "box.lan", 80)),
    ("https://[fd00::2]:9", ("https", "fd00::2", 9)),
    ("https://[fd00::2]", ("https", "fd00::2", 443)),
])
def test_an_address_is_host_port_or_an_http_or_https_origin(address: str,
                                                           endpoint: tuple[str, str, int]
                                                           ) -> None:
    got = fleet.parse_address(address)
    assert (got.scheme, got.host, got.port) == endpoint
    assert got.origin.startswith(f"{endpoint[0]}://")
    assert got.tls == (endpoint[0] == "https")


@pytest.mark.parametrize(("address", "message"), [
    ("https://box.lan:8765/api", "is not https://host:port (no path, query or user)"),
    ("https://user@box.lan:1", "is not https://host:port (no path, query or user)"),
    ("https://box.lan:1?x=1", "is not https://host:port (no path, query or user)"),
    ("ftp://box.lan:21", "scheme 'ftp' is not http or https"),
    ("https://", "is not https://host:port"),
    ("https://:8765", "is not https://host:port"),
    ("https://box.lan:", "is not https://host:port"),
    ("https://box.lan:99999", "port 99999 is outside 1-65535"),
])
def test_a_malformed_https_address_is_refused(address: str, message: str) -> None:
    with pytest.raises(ValueError) as got:
        fleet.parse_address(address)
    assert str(got.value).startswith(f"address {address!r}")
    assert str(got.value).endswith(message)


def test_lint_reports_bad_https_addresses_and_ca_files_at_their_position(
        tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path / "pki")
    (tmp_path / "tls").mkdir()
    shutil.copy(cert, tmp_path / "tls" / "ca.pem")
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "devices:\n"
        "  - {name: a, address: 'https://h:8443/api'}\n"
        "  - {name: b, address: 'h:8765', caFile: tls/ca.pem}\n"
        "  - {name: c, address: 'https://h:8765', caFile: tls/missing.pem}\n"
        f"  - {{name: d, address: 'https://h:8765', caFile: {key}}}\n"
        "  - {name: e, caFile: tls/ca.pem}\n"
        "  - {name: f, address: 'https://h:8765', caFile: tls/ca.pem}\n"
        "  - {name: g, address: 'https://h:8765', caFile: tls}\n")
    found = [(p.line, p.col, p.field, p.rule, p.message)
             for p in settings_check.fleet_problems(path)]
    assert found == [
        (2, 24, "devices.0.address", "bad-address",
         "address 'https://h:8443/api' is not https://host:port (no path, query or user)"),
        (3, 42, "devices.1.caFile", "ca-file",
         "caFile is only used over TLS, but address 'h:8765' is plain HTTP: write it as "
         "https://host:port"),
        (4, 50, "devices.2.caFile", "ca-file",
         f"caFile {tmp_path}/tls/missing.pem: cannot read it: No such file or directory"),
        (5, 50, "devices.3.caFile", "ca-file",
         f"caFile {key}: holds no usable PEM certificate (NO_CERTIFICATE_OR_CRL_FOUND)"),
        (6, 23, "devices.4.caFile", "ca-file",
         "caFile is only used over TLS, and this device has no address"),
        (8, 50, "devices.6.caFile", "ca-file",
         f"caFile {tmp_path}/tls: is a directory, not a PEM file")]
    with pytest.raises(errors.ConfigError,
                       match=r"^\S*fleet.yaml:2:24: devices.0.address: address 'https://h:8443"
                             r"/api' is not https://host:port \(no path, query or user\) "
                             r"\(and 5 more; `monitors lint` lists them\)$"):
        fleet.load(path)


def test_an_unreadable_ca_file_is_a_lint_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a mode 000 file")
    cert, _ = self_signed(tmp_path / "pki")
    cert.chmod(0)
    path = tmp_path / "fleet.yaml"
    path.write_text(f"devices:\n  - name: a\n    address: https://h:1\n    caFile: {cert}\n")
    with pytest.raises(errors.ConfigError, match=r"fleet.yaml:4:13: devices.0.caFile: caFile "
                       r".*cert.pem: cannot read it: Permission denied$"):
        fleet.load(path)


def test_ca_file_is_relative_to_the_fleet_files_directory(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    cert, _ = self_signed(tmp_path / "conf" / "tls")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    path = tmp_path / "conf" / "fleet.yaml"
    path.write_text("devices:\n  - {name: a, address: 'https://h:1', caFile: tls/cert.pem}\n"
                    "  - {name: b, address: 'https://h:2'}\n"
                    "  - {name: c, address: 'h:3'}\n")
    loaded = fleet.load(path)
    assert [d.ca_file for d in loaded.devices] == [cert, None, None]
    assert [fleet.parse_address(str(d.address)).scheme for d in loaded.devices] == [
        "https", "https", "http"]


def test_a_ca_file_another_user_could_write_is_refused(tmp_path: Path) -> None:
    """Whoever can write the bundle can make this device trust their server, and send
    it the fleet's token."""
    cert, _ = self_signed(tmp_path / "pki")
    path = tmp_path / "fleet.yaml"
    path.write_text(f"devices:\n  - name: a\n    address: https://h:1\n    caFile: {cert}\n")
    assert fleet.load(path).devices[0].ca_file == cert
    cert.chmod(0o666)
    [problem] = settings_check.fleet_problems(path)
    assert (problem.line, problem.col, problem.field, problem.rule) == (
        4, 13, "devices.0.caFile", "unsafe-permissions")
    assert problem.message.startswith("refused this CA file: ")
    assert problem.message.endswith(f"world-writable (mode 0666): chmod o-w {cert}")
