"""How this device reaches a fleet peer's HTTP API: the base URL, the TLS trust, and one
line for a TLS failure. Shared by the fleet client (``client.fleet``: ``list``, ``add``,
``plan --device``) and the ``device`` source, so both speak to a peer the same way.

* ``link(device)``: the peer's ``Link`` (its ``fleet.Endpoint`` from ``address`` and
  its ``caFile``).
* ``Link.verify()``: the ``ssl.SSLContext`` an ``https://`` peer's certificate is
  verified with: the system trust store (OpenSSL's default paths, which
  ``SSL_CERT_FILE``/``SSL_CERT_DIR`` override; a private CA installed with
  ``update-ca-certificates`` is trusted), or only the PEM bundle ``caFile`` names when
  set (as curl's ``--cacert``, etcd's ``--cacert`` and a kubeconfig's
  ``certificate-authority`` do). Verification is always on and the name checked is
  the address's host (RFC 9110 section 4.3.4; an IP address must be in the
  certificate's subjectAltName). There is no switch to turn it off: a bearer token
  goes with every request, and an unverified peer would receive it. Contexts are
  made once per CA file version (path, size, mtime) and reused.
* ``failure(link, exc)``: what went wrong with TLS as one line saying what to do
  (``caFile``, the address's scheme), or None when the error is not about TLS.

Reads the CA file; acts on nothing else. No httpx import here.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from reconciler import errors, fleet

_contexts: dict[tuple[str, int, int], ssl.SSLContext] = {}


@dataclass(frozen=True, slots=True)
class Link:
    """How to reach one fleet device.

    Attributes:
        device: its name.
        endpoint: scheme, host and port (``fleet.parse_address``).
        ca_file: the PEM bundle to trust for it (None: the system trust store).
        fleet_file: the fleet file's name as shown in advice (``fleet.yaml``).
    """

    device: str
    endpoint: fleet.Endpoint
    ca_file: Path | None = None
    fleet_file: str = "fleet.yaml"

    def url(self, path: str) -> str:
        """``<origin><path>``: ``https://10.0.0.2:8765/healthz``."""
        return self.endpoint.origin + path

    @property
    def tls(self) -> bool:
        """True when the peer is reached over HTTPS."""
        return self.endpoint.tls

    def verify(self) -> ssl.SSLContext:
        """The TLS client context for this peer (see the module docstring); the same
        object for every peer trusting the same file, until that file changes.

        Raises:
            errors.ConfigError: ``caFile`` cannot be read or holds no PEM certificate
                (one line naming the device and the file).
        """
        return context(self.ca_file, device=self.device)


def link(device: fleet.Device, *, fleet_file: str = "fleet.yaml") -> Link:
    """``device``'s ``Link``.

    Raises:
        ValueError: it has no address, or its address does not parse
            (``fleet.parse_address``'s message).
    """
    if not device.address:
        raise ValueError(f"device {device.name!r} has no address in {fleet_file}")
    return Link(device.name, fleet.parse_address(device.address), device.ca_file,
                fleet_file)


def context(ca_file: Path | None, *, device: str = "") -> ssl.SSLContext:
    """A TLS client context verifying with ``ca_file`` (None: the system trust store):
    ``ssl.create_default_context`` (TLS 1.2 or later, hostname checked, certificates
    required). Cached per file version.

    Raises:
        errors.ConfigError: ``ca_file`` cannot be read or holds no certificate.
    """
    try:
        st = os.stat(ca_file) if ca_file is not None else None
        key = (str(ca_file), st.st_size, st.st_mtime_ns) if st is not None else ("", 0, 0)
        tls = _contexts.get(key)
        if tls is None:
            tls = ssl.create_default_context(cafile=None if ca_file is None else str(ca_file))
            _contexts[key] = tls
    except (OSError, ssl.SSLError) as e:  # ``device beta: caFile tls/ca.pem: cannot ...``
        who = f"device {device}: " if device else ""
        raise errors.ConfigError(f"{who}caFile {ca_file}: {_unusable(e)}") from None
    return tls


def check_ca_file(path: Path) -> str | None:
    """Why the PEM bundle at ``path`` cannot verify a peer (lint: ``cannot read it: No
    such file or directory``), or None when it loads (the same loading ``context``
    does, without keeping it)."""
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as e:
        return _unusable(e)
    return None


def _unusable(e: OSError) -> str:
    if isinstance(e, ssl.SSLError):
        return f"holds no usable PEM certificate ({e.reason or e})"
    if isinstance(e, IsADirectoryError):
        return "is a directory, not a PEM file"
    return f"cannot read it: {e.strerror or e}"


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(out) < 8:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def failure(link: Link, exc: BaseException) -> str | None:
    """One line for a TLS failure reaching ``link``, naming the device and what to do;
    None when ``exc`` (an httpx error, its cause chain searched) is not about TLS, except
    a plain-HTTP peer that hung up without answering, which is what a TLS server does
    with plain HTTP: the line then suggests ``https://``.

    Lines:
        a certificate that fails verification (untrusted, expired, wrong name):
        ``certificate verify failed: self-signed certificate: set caFile for device
        beta in fleet.yaml to the PEM of the CA that signed its certificate (or to
        that certificate if self-signed)``; another handshake failure (a plain-HTTP
        server at an ``https://`` address): ``TLS handshake failed: ...``.
    """
    chain = _chain(exc)
    cert = next((c for c in chain if isinstance(c, ssl.SSLCertVerificationError)), None)
    where = f"device {link.device} in {link.fleet_file}"
    if cert is not None:
        why = str(cert.verify_message or cert.reason or cert).rstrip(".")
        code = cert.verify_code
        if code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
            return (f"certificate verify failed: {why}: address {where} by a name or IP "
                    "address its certificate holds (subjectAltName)")
        if link.ca_file is not None:
            return (f"certificate verify failed: {why}: caFile {link.ca_file} does not "
                    f"hold the CA that signed it (fix caFile for {where})")
        return (f"certificate verify failed: {why}: set caFile for {where} to the PEM "
                "of the CA that signed its certificate (or to that certificate if "
                "self-signed)")
    tls = next((c for c in chain if isinstance(c, ssl.SSLError)), None)
    if tls is not None:
        why = str(tls.reason or tls).replace("_", " ").lower()
        return (f"TLS handshake failed: {why}: does it serve HTTPS ([http] certFile "
                f"there)? plain HTTP is written host:port in {link.fleet_file}")
    if not link.tls and any("disconnected without sending" in str(c) for c in chain):
        hostport = link.endpoint.origin.partition("://")[2]
        return (f"it closed the connection without answering: if it serves HTTPS "
                f"([http] certFile there), write its address as https://{hostport} "
                f"in {link.fleet_file}")
    return None
