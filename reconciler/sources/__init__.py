"""Sources: what a monitor watches, turned into ``model.Observation`` values.

One module per source type and an explicit registry keyed by the YAML
``source.type`` (``REGISTRY``). Every source exposes ``async observe(monitor,
ctx) -> Observation``; a check that cannot produce an observation raises
``errors.SourceError`` (``kind`` names the class of failure). The long-running
``command`` source is a stream as well (``STREAMS``): ``stream(monitor, ctx)``
yields one item per stdout line and restarts the command with backoff.

Sources never decide (that is ``conditions``) and never write condition state;
the only state a source touches is the pid source's marker (not in a dry run).
Text that came from a watched source never goes through a shell.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from reconciler import errors, redaction
from reconciler.fleet import Fleet
from reconciler.model import Monitor, Observation, SourceType

if TYPE_CHECKING:
    from reconciler.settings import Settings
    from reconciler.state.store import Store

HTTP_IN_FLIGHT = 25
"""Default cap on HTTP polls in flight: httpx slows down past about 25 (measured)."""


@dataclass
class SourceContext:
    """What sources share: pooled HTTP client, in-flight cap, store, fleet, settings.

    Attributes:
        http: the shared pooled ``httpx.AsyncClient`` (redirects are chosen per request).
        http_slots: caps HTTP requests in flight.
        store: the state store (pid markers), or None.
        fleet: the fleet (device sources).
        settings: resolved settings, or None (tests).
        device: this device's name.
        dry_run: ``monitors test``: sources must write nothing.
        redactor: the shared redactor; every ``${NAME}`` value a source expands is
            registered with it (the engine redacts observations with it).
        environ: the environment ``${NAME}`` reads and commands inherit.
    """

    http: httpx.AsyncClient
    http_slots: asyncio.Semaphore
    store: Store | None = None
    fleet: Fleet = field(default_factory=Fleet)
    settings: Settings | None = None
    device: str = ""
    dry_run: bool = False
    redactor: redaction.Redactor = field(default_factory=redaction.Redactor)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

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
        """Build a context with one pooled client sized to ``http_in_flight``.
        Close it with ``aclose``. TLS verification is on (httpx's default)."""
        limits = httpx.Limits(
            max_connections=http_in_flight, max_keepalive_connections=http_in_flight
        )
        client = httpx.AsyncClient(limits=limits, follow_redirects=False, trust_env=False)
        return cls(
            http=client,
            http_slots=asyncio.Semaphore(http_in_flight),
            store=store,
            fleet=fleet or Fleet(),
            settings=settings,
            device=settings.device if settings is not None else "",
            dry_run=dry_run,
            redactor=redactor or redaction.Redactor(),
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()

    def resolve(self, text: str) -> Path:
        """A source path as written (``file.path``, ``cwd``): ``~`` expanded, and a relative
        path taken from the repository root (not the daemon's working directory), so a
        monitor means the same thing whoever starts the daemon and from where."""
        path = Path(text).expanduser()
        if not path.is_absolute() and self.settings is not None:
            path = self.settings.root / path
        return path

    def process_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """``spec`` with ``cwd`` resolved (``resolve``; no ``cwd`` means the repository
        root) and ``${NAME}`` expanded in ``env`` values (``expand``).

        Raises:
            errors.SourceError: kind ``config``: an ``env`` value names an unset variable.
        """
        out = dict(spec)
        cwd = spec.get("cwd")
        if cwd:
            out["cwd"] = str(self.resolve(str(cwd)))
        elif self.settings is not None:
            out["cwd"] = str(self.settings.root)
        if spec.get("env"):
            out["env"] = {k: self.expand(str(v), where=f"env {k}")
                          for k, v in spec["env"].items()}
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


class Source(Protocol):
    """A polled source (a module exposing ``observe``)."""

    async def observe(self, monitor: Monitor, ctx: SourceContext) -> Observation:
        """One check of ``monitor.source``.

        Raises:
            errors.SourceError: a check error (timeout, spawn, connect, unreadable, ...).
        """
        ...


@dataclass(frozen=True, slots=True)
class Started:
    """A stream item: the long-running command (re)started (``pid``)."""

    pid: int


StreamItem = Observation | errors.SourceError | Started
"""What a stream yields: an observation per line, a check error when the command
could not start or exited, or ``Started`` when it (re)started."""


class StreamSource(Protocol):
    """A long-running source (a module exposing ``stream``)."""

    def stream(self, monitor: Monitor, ctx: SourceContext) -> AsyncIterator[StreamItem]:
        """Yield items until closed (``aclose``), restarting with backoff."""
        ...


def _registry() -> tuple[dict[SourceType, Source], dict[SourceType, StreamSource]]:
    from . import command, device, file, http, pid, poll, push

    polled: dict[SourceType, Source] = {
        SourceType.POLL: poll,
        SourceType.COMMAND: command,
        SourceType.POLL_HTTP: http,
        SourceType.FILE: file,
        SourceType.PID: pid,
        SourceType.DEVICE: device,
        SourceType.WS: push,
        SourceType.WEBHOOK: push,
    }
    return polled, {SourceType.COMMAND: command}


REGISTRY, STREAMS = _registry()
"""``REGISTRY``: YAML type -> module with ``observe`` (every type; push types raise
"not evaluated yet"). ``STREAMS``: the types evaluated as streams."""

NOT_EVALUATED = frozenset({SourceType.WS, SourceType.WEBHOOK})
"""Validated but not evaluated yet: the engine says so and skips them."""


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """One check of ``monitor`` through its registered source.

    Raises:
        errors.SourceError: the check failed.
    """
    return await REGISTRY[monitor.source_type].observe(monitor, ctx)


def is_stream(monitor: Monitor) -> bool:
    """True when the engine evaluates ``monitor`` as a stream (``command``)."""
    return monitor.source_type in STREAMS
