"""What sources share at run time: the HTTP client and its workers, the store, the fleet.

``SourceContext`` is built once by the engine (or ``monitors test``) and passed to
every ``observe``/``stream``. httpx is imported when the first HTTP poll asks for the
client (``http``), so a run without HTTP monitors (``run --once`` on commands) never
imports it; the declarative half of the sources package (specs, registry) never
does, so lint stays light.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconciler import errors, redaction
from reconciler.fleet import Fleet
from reconciler.sources.workers import Workers

if TYPE_CHECKING:
    import ssl

    import httpx

    from reconciler.settings import Settings
    from reconciler.state.store import Store


class CommandLike(Protocol):
    """A source spec that runs a command (``poll``, ``command``)."""

    @property
    def command(self) -> str | tuple[str, ...]: ...

    @property
    def cwd(self) -> str | None: ...

    @property
    def env(self) -> Mapping[str, str]: ...


HTTP_IN_FLIGHT = 25
"""Default cap on HTTP polls in flight: httpx slows down past about 25 (measured)."""


@dataclass
class SourceContext:
    """What sources share: HTTP client, in-flight cap, store, fleet, settings.

    Attributes:
        http_in_flight: the cap on HTTP requests in flight (``http_workers``).
        http_workers: ``http_in_flight`` workers that run HTTP polls' requests (the
            cap; ``sources.workers`` says why workers rather than a semaphore).
        store: the state store (pid markers), or None.
        fleet: the fleet (device sources).
        settings: resolved settings, or None (tests).
        device: this device's name.
        dry_run: ``monitors test``: sources must write nothing.
        redactor: the shared redactor; every ``${NAME}`` value a source expands is
            registered with it (the engine redacts observations with it).
        environ: the environment ``${NAME}`` reads and commands inherit.
        prepared: what a source type prepares once and reuses on every poll, by
            ``source.type`` (``poll-http``: parsed URLs and timeouts; ``http.prepare``).
    """

    http_in_flight: int
    http_workers: Workers
    store: Store | None = None
    fleet: Fleet = field(default_factory=Fleet)
    settings: Settings | None = None
    device: str = ""
    dry_run: bool = False
    redactor: redaction.Redactor = field(default_factory=redaction.Redactor)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    prepared: dict[str, dict[Any, Any]] = field(default_factory=dict, repr=False)
    _http: httpx.AsyncClient | None = field(default=None, repr=False)
    _peer_http: dict[ssl.SSLContext, httpx.AsyncClient] = field(default_factory=dict,
                                                                 repr=False)

    @classmethod
    def create(
        cls,
        *,
        store: Store | None = None,
        fleet: Fleet | None = None,
        settings: Settings | None = None,
        http_in_flight: int = HTTP_IN_FLIGHT,
        dry_run: bool = False,
        redactor: redaction.Redactor | None = None,
    ) -> SourceContext:
        """Build a context whose HTTP client (made on first use) has ``http_in_flight``
        workers. Close it with ``aclose``."""
        return cls(
            http_in_flight=http_in_flight,
            http_workers=Workers(http_in_flight, name="monitors:http"),
            store=store,
            fleet=fleet or Fleet(),
            settings=settings,
            device=settings.device if settings is not None else "",
            dry_run=dry_run,
            redactor=redactor or redaction.Redactor(),
        )

    @property
    def http(self) -> httpx.AsyncClient:
        """The shared ``httpx.AsyncClient``, made on first use: each of ``http_workers``
        sends through its own connection pool, other callers through one pool of
        ``http_in_flight`` (``sources.httppools``); redirects are chosen per request;
        TLS verification on, httpx's default; no proxy from the environment; cookies
        kept for one request and its redirects only (``sources.cookiejar``); no timeout
        of its own: each caller sets its deadline, as ``http.fetch`` does with one
        ``asyncio.timeout`` for the whole request."""
        if self._http is None:
            import httpx

            from reconciler.sources import cookiejar, httppools

            limits = httpx.Limits(max_connections=self.http_in_flight,
                                  max_keepalive_connections=self.http_in_flight)
            self._http = httpx.AsyncClient(
                transport=httppools.PerWorker(self.http_workers, limits),
                cookies=cookiejar.PollCookieJar(),
                follow_redirects=False, trust_env=False, timeout=None)
        return self._http

    def peer_http(self, verify: ssl.SSLContext) -> httpx.AsyncClient:
        """A client whose TLS connections are verified with ``verify`` (a fleet peer's
        trust: ``fleetlink.Link.verify``), made on first use per context and closed by
        ``aclose``; otherwise as ``http`` (no redirects, no proxy from the environment,
        no timeout of its own). ``http`` keeps its own trust, so a peer's ``caFile``
        never changes what ``poll-http`` monitors trust. ``fleetlink`` makes one
        context per CA file version, so there are as many clients as CA files."""
        made = self._peer_http.get(verify)  # by identity: SSLContext has no __eq__
        if made is not None:
            return made
        import httpx

        limits = httpx.Limits(max_connections=self.http_in_flight,
                              max_keepalive_connections=self.http_in_flight)
        client = httpx.AsyncClient(verify=verify, limits=limits, follow_redirects=False,
                                   trust_env=False, timeout=None)
        self._peer_http[verify] = client
        return client

    async def aclose(self) -> None:
        """Stop the HTTP workers and close the HTTP clients (those that were made)."""
        await self.http_workers.aclose()
        if self._http is not None:
            await self._http.aclose()
        peers, self._peer_http = list(self._peer_http.values()), {}
        for client in peers:
            await client.aclose()

    def resolve(self, text: str) -> Path:
        """A source path as written (``file.path``, ``cwd``): ``~`` expanded, and a relative
        path taken from the repository root (not the daemon's working directory), so a
        monitor means the same thing whoever starts the daemon and from where."""
        path = Path(text).expanduser()
        if not path.is_absolute() and self.settings is not None:
            path = self.settings.root / path
        return path

    def process_spec(self, spec: CommandLike) -> dict[str, Any]:
        """``{"command", "cwd", "env"}`` of a command source ``spec`` (``poll``,
        ``command``) for ``sources.process``: ``cwd`` resolved (``resolve``; no ``cwd``
        means the repository root) and ``${NAME}`` expanded in ``env`` values (``expand``).

        Raises:
            errors.SourceError: kind ``config``: an ``env`` value names an unset variable.
        """
        out: dict[str, Any] = {"command": spec.command, "cwd": spec.cwd, "env": dict(spec.env)}
        if spec.cwd:
            out["cwd"] = str(self.resolve(str(spec.cwd)))
        elif self.settings is not None:
            out["cwd"] = str(self.settings.root)
        if spec.env:
            out["env"] = {k: self.expand(str(v), where=f"env {k}")
                          for k, v in spec.env.items()}
        return out

    def expand(self, text: str, *, where: str) -> str:
        """``text`` with each ``${NAME}`` replaced from ``environ``, each value
        registered with ``redactor``.

        Raises:
            errors.SourceError: kind ``config`` naming ``where`` and the unset variable
                (never a value); not permanent: the variable may be set before a restart.
        """
        try:
            return redaction.expand(text, environ=self.environ, redactor=self.redactor)
        except redaction.Unset as e:
            raise errors.SourceError(f"{where}: {e}", kind="config") from None
