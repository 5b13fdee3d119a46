"""Sources: what a monitor watches, turned into ``model.Observation`` values.

One module per source type (its spec, normalization, description, checks, ``add``
flag and ``observe``), and an explicit registry keyed by the YAML ``source.type``
(``sources.registry``). Every polled source exposes ``async observe(monitor, ctx)
-> Observation``; a check that cannot produce an observation raises
``errors.SourceError`` (``kind`` names the class of failure). The long-running
``command`` source is a stream as well: ``stream(monitor, ctx)`` yields one item per
stdout line and restarts the command with backoff. What sources share at run time
(the pooled HTTP client, the store) is ``sources.context.SourceContext``.

Sources never decide (that is ``conditions``) and never write condition state;
the only state a source touches is the pid source's marker (not in a dry run).
Text that came from a watched source never goes through a shell. This package
``__init__`` stays light (no httpx, no asyncio): lint imports the registry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from reconciler import errors
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

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


@dataclass(frozen=True, slots=True)
class Connected:
    """A stream item: the connection (``ws``) is (re)established."""

    url: str


StreamItem = Observation | errors.SourceError | Started | Connected
"""What a stream yields: an observation per line or frame, a check error when the
command could not start or exited (the connection failed or dropped), ``Started`` when
the command (re)started, ``Connected`` when the connection was (re)established."""


class StreamSource(Protocol):
    """A long-running source (a module exposing ``stream``)."""

    def stream(self, monitor: Monitor, ctx: SourceContext) -> AsyncIterator[StreamItem]:
        """Yield items until closed (``aclose``), restarting with backoff."""
        ...
