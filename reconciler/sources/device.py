"""``device``: a fleet device's reachability plus a headroom bucket.

The device and its address come from the fleet file. Each probe is ``GET
<origin>/healthz`` (the daemon's HTTP API, open without a token;
``server.health``) within ``timeout``. The observation is ``reachable`` or
``unreachable`` (the TCP connection could not be made in time; a down device
is an observation, not a check error), then a second line
``headroom: ok|low|critical|unknown``. Headroom is the bucket the peer reports
in its ``/healthz`` answer (disk free under its state directory and load per
CPU); a peer that accepts the connection but does not answer API v1 JSON is
reachable with headroom ``unknown`` (the reason in ``meta.error``). For this
device the bucket is measured here.

The origin and, for an ``https://`` address, the TLS context verifying the peer
against its ``caFile`` (else the system trust store) come from
``reconciler.fleetlink``, as for the fleet client; such a probe goes through
``SourceContext.peer_http`` (a client per trust), so ``poll-http``'s trust is
never changed. A peer whose certificate fails verification is a check error of
kind ``tls`` naming the device and what to do, not ``unreachable``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.sources.fields import doc

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

DEFAULT_INTERVAL = 60.0
ON_ERROR = "observe"
"""The default ``condition.onError``: an outage of the watched thing is its event."""
TIMEOUT_CAP = 5.0
"""Seconds: the default ``timeout`` is the interval, at most this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    """A ``device`` source: a fleet device's reachability every ``interval`` seconds."""

    TYPE: ClassVar[str] = "device"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "device", "interval", "timeout")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    device: str = doc("A device name from the fleet file (its host:port is probed).",
                      "laptop")
    interval: float = doc("How often to probe the device (500ms..7d).", "1m",
                          default=DEFAULT_INTERVAL)
    timeout: float = doc("Deadline of the /healthz probe; a connection not made by then is "
                         "unreachable. Default: the interval, at most 5s.", "3s")

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``device: laptop every 1m``."""
        return fields.describe(self.TYPE, self.device, self.interval)


Spec = DeviceSpec


def normalize(raw: Mapping[str, Any]) -> DeviceSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    interval = fields.dur(raw.get("interval"), DEFAULT_INTERVAL)
    return DeviceSpec(device=raw["device"], interval=interval,
                      timeout=fields.dur(raw.get("timeout"), min(interval, TIMEOUT_CAP)))


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """No checks beyond the shared ones (durations) for ``device``; the fleet file is
    checked across files (``config.repochecks``)."""
    return []

DISK_LOW, DISK_CRITICAL = 0.15, 0.05  # free fraction
HEADROOM_BUCKETS = ("ok", "low", "critical")
LOAD_LOW, LOAD_CRITICAL = 2.0, 4.0  # 1-minute load per CPU


ADD = AddFlag("--watch-device", "NAME", "A fleet device's reachability.",
                     interval=True)
"""``monitors add --watch-device NAME [--interval D]``."""


def from_flag(value: str, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--watch-device NAME``."""
    return {"type": DeviceSpec.TYPE, "device": value, "interval": interval}

def headroom(path: Path) -> tuple[str, dict[str, float]]:
    """The headroom bucket of this machine and the figures behind it."""
    import shutil  # here: its compression imports (lzma, bz2) cost lint ~3 ms at start

    try:
        usage = shutil.disk_usage(path if path.exists() else Path("/"))
        free = usage.free / usage.total if usage.total else 1.0
    except OSError:
        free = 1.0
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 0.0
    if free < DISK_CRITICAL or load > LOAD_CRITICAL:
        bucket = "critical"
    elif free < DISK_LOW or load > LOAD_LOW:
        bucket = "low"
    else:
        bucket = "ok"
    return bucket, {"diskFree": round(free, 3), "loadPerCpu": round(load, 2)}


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Probe the device once.

    Raises:
        errors.SourceError: kind ``config`` (permanent) when the device is not in the
            fleet file or has no usable address.
    """
    import asyncio

    spec = monitor.source
    assert isinstance(spec, DeviceSpec)
    name = spec.device
    device = ctx.fleet.get(name)
    if device is None:
        raise errors.SourceError(f"device {name!r} is not in the fleet file",
                                 kind="config", permanent=True)
    if not device.address:
        raise errors.SourceError(f"device {name!r} has no address in the fleet file",
                                 kind="config", permanent=True)
    from reconciler import fleetlink

    try:
        link = fleetlink.link(device, fleet_file=ctx.settings.fleet_file.name
                              if ctx.settings is not None else "fleet.yaml")
    except ValueError as e:
        raise errors.SourceError(f"device {name!r}: {e}", kind="config", permanent=True) from e
    try:  # a peer over https gets a client trusting its caFile; plain http the shared one
        client = ctx.peer_http(link.verify()) if link.tls else ctx.http
    except errors.ConfigError as e:  # the CA file went away since the fleet was read
        raise errors.SourceError(str(e), kind="config") from None
    import httpx

    timeout = spec.timeout
    started = time.monotonic()
    meta: dict[str, object] = {"address": device.address}
    bucket = "unknown"
    try:
        answer = await client.get(link.url("/healthz"), timeout=timeout)
        reach = "reachable"
        try:
            doc = answer.json()
        except ValueError:
            doc = None
        if answer.status_code == 200 and isinstance(doc, dict) and \
                doc.get("headroom") in HEADROOM_BUCKETS:
            bucket = str(doc["headroom"])
        else:
            meta["error"] = f"/healthz answered HTTP {answer.status_code}, not API v1 JSON"
    except httpx.InvalidURL as e:
        raise errors.SourceError(f"device {name!r}: address {device.address!r}: {e}",
                                 kind="config", permanent=True) from None
    except httpx.HTTPError as e:
        tls = fleetlink.failure(link, e)
        if tls is not None and link.tls:  # connected, but the peer is not the one trusted
            raise errors.SourceError(f"device {name!r}: {tls}", kind="tls") from None
        if isinstance(e, httpx.ConnectError | httpx.ConnectTimeout):
            reach = "unreachable"
            cause: BaseException = e
            while (cause.__cause__ or cause.__context__) is not None:  # the OSError beneath
                cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
            meta["error"] = type(cause).__name__ + (f": {cause}" if str(cause) else "")
        else:  # connected, then no HTTP answer (timeout, garbage, TLS spoken to plain HTTP)
            reach = "reachable"
            meta["error"] = tls or type(e).__name__ + (f": {e}" if str(e) else "")
    meta["duration"] = round(time.monotonic() - started, 4)
    if ctx.device and name == ctx.device:
        state_dir = ctx.settings.state_dir if ctx.settings is not None else Path("/")
        bucket, figures = await asyncio.to_thread(headroom, state_dir)
        meta.update(figures)
    return Observation(f"{reach}\nheadroom: {bucket}", meta)
