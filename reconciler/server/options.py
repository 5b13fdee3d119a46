"""``[http]`` of monitors.toml: where the daemon's HTTP server listens and how.

Fields (README, "The HTTP API"): ``listen`` (``host:port``, default
``127.0.0.1:8765``; ``""`` disables the server; ``MONITORS_HTTP_LISTEN`` wins),
``certFile`` and ``keyFile`` (TLS, both or neither, relative to the root),
``tokenFile`` (``reconciler.tokens``), ``openOnLoopback`` (the status page needs no
token from a loopback client), ``maxBodyBytes`` (default 1 MiB) and
``requestTimeout`` (a duration, default 10s). ``ssl_context`` loads the TLS pair.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from reconciler import durations, errors, fleet, settings

DEFAULT_LISTEN = "127.0.0.1:8765"
ENV_LISTEN = "MONITORS_HTTP_LISTEN"
DEFAULT_MAX_BODY = 1 << 20
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How the HTTP server runs.

    Attributes:
        listen: ``host:port`` ("" when disabled); port 0 picks a free port (the
            bound address is in ``status`` as ``endpoints.http``).
        cert_file, key_file: PEM files for TLS, or None (plain HTTP).
        open_on_loopback: the status page answers loopback clients without a token.
        max_body: bytes a request body may have (413 past it).
        timeout: seconds a request may take (503 past it).
    """

    listen: str = DEFAULT_LISTEN
    cert_file: Path | None = None
    key_file: Path | None = None
    open_on_loopback: bool = False
    max_body: int = DEFAULT_MAX_BODY
    timeout: float = DEFAULT_TIMEOUT

    @property
    def enabled(self) -> bool:
        """False when ``listen`` is ``""``."""
        return bool(self.listen)

    @property
    def host_port(self) -> tuple[str, int]:
        """``listen`` split (``fleet.split_address``; port 0 allowed)."""
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


def load(cfg: settings.Settings, *, environ: dict[str, str] | None = None) -> HttpOptions:
    """The ``[http]`` options of ``cfg`` (the schema checked their types).

    Raises:
        errors.ConfigError: ``listen`` is not ``host:port``, only one of
            ``certFile``/``keyFile`` is set, or ``requestTimeout`` is not a duration.
    """
    env = os.environ if environ is None else environ
    section = cfg.section("http")
    listen = env.get(ENV_LISTEN)
    where = ENV_LISTEN
    if listen is None:
        listen, where = str(section.get("listen", DEFAULT_LISTEN)), "monitors.toml: http.listen"
    listen = listen.strip()
    if listen:
        try:
            fleet.split_address(listen, port_zero=True)
        except ValueError as e:
            raise errors.ConfigError(f"{where}: {e}") from e
    cert, key = section.get("certFile"), section.get("keyFile")
    if bool(cert) != bool(key):
        raise errors.ConfigError("monitors.toml: http: certFile and keyFile go together "
                                 "(TLS needs both)")
    try:
        timeout = durations.parse(section.get("requestTimeout", "10s"))
    except ValueError as e:
        raise errors.ConfigError(f"monitors.toml: http.requestTimeout: {e}") from e
    return HttpOptions(
        listen=listen,
        cert_file=cfg.root / str(cert) if cert else None,
        key_file=cfg.root / str(key) if key else None,
        open_on_loopback=bool(section.get("openOnLoopback", False)),
        max_body=int(section.get("maxBodyBytes", DEFAULT_MAX_BODY)),
        timeout=timeout,
    )


def ssl_context(options: HttpOptions) -> ssl.SSLContext | None:
    """The server's TLS context from ``certFile``/``keyFile`` (None: plain HTTP).

    Raises:
        errors.ConfigError: the files cannot be read or do not hold a key pair.
    """
    if options.cert_file is None or options.key_file is None:
        return None
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        tls.load_cert_chain(options.cert_file, options.key_file)
    except (OSError, ssl.SSLError) as e:
        raise errors.ConfigError(f"monitors.toml: http.certFile/keyFile: cannot load "
                                 f"{options.cert_file}, {options.key_file}: {e}") from e
    return tls
