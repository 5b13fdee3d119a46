"""``ws``: a WebSocket whose frames are observations (a stream, ``stream``).

``stream`` connects with the ``websockets`` library (RFC 6455), sending ``headers``
(``${NAME}`` expanded from the environment and registered as secrets), yields
``Connected``, then one ``Observation`` per frame: a text frame as it is, a binary
frame as base64 (``meta.binary``), ``select`` (JMESPath) applied when set. When the
connection fails or drops it yields a check error and reconnects after a backoff
(exponential from ``backoff``, capped at ``MAX_BACKOFF``, with full jitter as in
https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/; reset
once a connection lasted ``STABLE_RUN`` seconds). The library pings every ``ping``
seconds and drops a connection whose pong does not come within as long (keepalive);
a frame over ``maxBytes`` closes the connection (1009) and is a check error.
Closing the stream closes the connection.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import Connected, StreamItem, fields, push
from reconciler.sources import select as select_mod
from reconciler.sources.fields import DEFAULT_MAX_BYTES, doc

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

observe = push.observe
PUSH = True
"""Pushed, not polled: a stream of frames."""
STREAM = True
"""Evaluated as a stream (``stream``)."""
LINK = True
"""A connection: ``list`` shows connected / reconnecting with the last error."""
PUSHED_AS = "--frame"
"""The ``monitors test`` option that pushes to this type (``sources.registry.pushed``)."""
WAITING = "connected, no frame yet"
"""What ``list`` shows before the first frame (instead of "never polled")."""

DEFAULT_BACKOFF = 1.0
MAX_BACKOFF = 60.0
STABLE_RUN = 30.0
DEFAULT_PING = 20.0
OPEN_TIMEOUT = 10.0

ADD = AddFlag("--ws", "URL", "Each frame pushed over a WebSocket.")
"""``monitors add --ws URL``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WsSpec:
    """A ``ws`` source: the WebSocket at ``url``."""

    TYPE: ClassVar[str] = "ws"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "url", "headers", "select", "maxBytes",
                                       "ping", "backoff")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    url: str = doc("The ws:// or wss:// URL to connect to.", "wss://example.com/events")
    headers: Mapping[str, str] = doc(
        "Handshake headers; values may use ${NAME} (never printed).",
        {"Authorization": "Bearer ${API_TOKEN}"}, default_factory=dict)
    select: str | None = doc(select_mod.DESCRIPTION.format(what="frame"),
                             "data.status", default=None, optional=True)
    max_bytes: int | None = doc("The largest frame in bytes (default 1 MiB); a larger one "
                                "drops the connection (a check error) and reconnects.",
                                65536, default=None, optional=True)
    ping: float | None = doc("Keepalive: seconds between pings; no pong as long after "
                             "one drops the connection (default 20s).", "20s",
                             default=None, optional=True)
    backoff: float | None = doc("First reconnect delay; doubles up to 60s, with jitter "
                                "(default 1s).", "1s", default=None, optional=True)

    @property
    def interval(self) -> None:
        """Pushed: no interval."""
        return None

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``ws: wss://example.com/events``."""
        return fields.describe(self.TYPE, self.url, None)


Spec = WsSpec


def normalize(raw: Mapping[str, Any]) -> WsSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    return WsSpec(url=raw["url"], headers=fields.strings(raw.get("headers")),
                  select=raw.get("select"),
                  max_bytes=int(raw["maxBytes"]) if "maxBytes" in raw else None,
                  ping=fields.dur(raw["ping"], DEFAULT_PING) if "ping" in raw else None,
                  backoff=(fields.dur(raw["backoff"], DEFAULT_BACKOFF) if "backoff" in raw
                           else None))


def from_flag(value: str, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--ws URL``.

    Raises:
        errors.UsageError: not a ws:// or wss:// URL.
    """
    if not re.match(r"^wss?://", value):
        raise errors.UsageError(f"--ws: expected a ws:// or wss:// URL, got {value!r}")
    return {"type": WsSpec.TYPE, "url": value}


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """``select`` compiles (``sources.select.check``)."""
    return select_mod.check(raw)


def frame_observation(spec: WsSpec, frame: str | bytes) -> Observation:
    """The observation of one frame: text as it is, binary as base64 (``meta.binary``),
    then ``select`` when set.

    Raises:
        errors.SourceError: kind ``select``.
    """
    if isinstance(frame, bytes):
        observed = Observation(base64.b64encode(frame).decode("ascii"),
                               {"binary": True, "bytes": len(frame)})
    else:
        observed = Observation(frame, {"binary": False})
    return observed if spec.select is None else select_mod.observation(spec.select, observed)


def backoff_delay(attempt: int, base: float, rand: Callable[[], float]) -> float:
    """Seconds to wait before reconnect ``attempt`` (0 first): full jitter,
    ``rand() * min(MAX_BACKOFF, base * 2**attempt)``, never under a tenth of ``base``."""
    ceiling = min(MAX_BACKOFF, base * 2 ** min(attempt, 30))
    return float(max(base / 10, rand() * ceiling))


async def stream(monitor: Monitor, ctx: SourceContext, *,
                 sleep: Callable[[float], Awaitable[None]] | None = None,
                 rand: Callable[[], float] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 ) -> AsyncGenerator[StreamItem, None]:
    """Yield ``Connected``, observations (one per frame) and check errors until closed.

    Args:
        sleep, rand, monotonic: the backoff's clock and randomness (tests inject them).
    """
    import asyncio
    import random

    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

    spec = monitor.source
    assert isinstance(spec, WsSpec)
    pause = sleep or asyncio.sleep
    jitter = rand or random.random
    base = spec.backoff or DEFAULT_BACKOFF
    ping = spec.ping or DEFAULT_PING
    attempt = 0
    while True:
        started = monotonic()
        try:
            headers = {k: ctx.expand(v, where=f"headers {k}") for k, v in spec.headers.items()}
            async with connect(spec.url, additional_headers=headers,
                               max_size=spec.max_bytes or DEFAULT_MAX_BYTES,
                               ping_interval=ping, ping_timeout=ping,
                               open_timeout=OPEN_TIMEOUT, proxy=None,
                               user_agent_header="monitors") as conn:
                yield Connected(spec.url)
                async for frame in conn:
                    try:
                        yield frame_observation(spec, frame)
                    except errors.SourceError as e:
                        yield e
                yield errors.SourceError(_closed(conn.close_code, conn.close_reason),
                                         kind="closed")
        except errors.SourceError as e:
            yield e
        except ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else (e.sent.code if e.sent else None)
            reason = e.rcvd.reason if e.rcvd else (e.sent.reason if e.sent else "")
            kind = "frame-too-large" if code == 1009 else "closed"
            yield errors.SourceError(_closed(code, reason), kind=kind)
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as e:
            yield errors.SourceError(f"cannot connect to {spec.url}: "
                                     f"{type(e).__name__}: {e}".rstrip(": "), kind="connect")
        if monotonic() - started >= STABLE_RUN:
            attempt = 0
        await pause(backoff_delay(attempt, base, jitter))
        attempt += 1


def _closed(code: int | None, reason: str | None) -> str:
    """One line for a closed connection (1009: a frame over ``maxBytes``)."""
    if code == 1009:
        return "connection closed: a frame was over maxBytes (1009)"
    return f"connection closed ({code if code is not None else 'no close frame'}" \
           + (f": {reason})" if reason else ")")


def pushed(monitor: Monitor, data: bytes, *, event: str | None = None) -> Observation:
    """The observation of one text frame ``data`` (UTF-8) for a dry run (``monitors test
    --frame TEXT``).

    Raises:
        errors.SourceError: kind ``select``.
    """
    spec = monitor.source
    assert isinstance(spec, WsSpec)
    return frame_observation(spec, data.decode("utf-8", "replace"))
