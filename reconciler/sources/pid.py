"""``pid``: is a process alive? ``running``, ``exited`` or ``notyetspawned``.

The default condition fires on ``exited`` (``config.normalize``). Arming rules
(from the original watch-pid model):

* a pid that is not alive when the watch has never seen it running is refused
  with a permanent check error, unless the source sets ``force: true``;
* a forced watch reports ``notyetspawned`` (never ``exited``) until a
  per-monitor marker (``Store.set_pid_marker``) has recorded the pid running
  once, so the first poll cannot read "not alive yet" as "exited", fire falsely
  and poison the baseline.

The marker also records the process's start time (field 22 of
``/proc/<pid>/stat``): once the watched process is gone its pid may be given to
another one, and a live pid whose start time differs from the marker's is read as
``exited`` (meta ``reused: true``), never as the watched process still running.

Liveness is ``processes.alive`` (also used by ``add --watch-pid``): a zombie
(exited, not yet reaped) counts as exited; a pid owned by another user
(``EPERM``) counts as running. A pid outside ``1..PID_MAX`` (0 and negative
numbers address process groups in ``kill(2)``) is a permanent check error of kind
``config``, never a foreign exception.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.sources.fields import doc

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

RUNNING = "running"
EXITED = "exited"
NOT_YET_SPAWNED = "notyetspawned"
DEFAULT_INTERVAL = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PidSpec:
    """A ``pid`` source: is process ``pid`` alive, every ``interval`` seconds."""

    TYPE: ClassVar[str] = "pid"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "pid", "interval", "force")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    pid: int = doc("The process id to watch (1..4194304, Linux's largest pid_max); the "
                   "default condition fires when it exits.",
                   12345)
    interval: float = doc("How often to check the process (500ms..7d).", "5s",
                          default=DEFAULT_INTERVAL)
    force: bool = doc("Arm on a pid that is not running yet (it reads notyetspawned until "
                      "seen running once).", True, default=False)

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``pid: 4242 every 5s``."""
        return fields.describe(self.TYPE, self.pid, self.interval)


Spec = PidSpec


def normalize(raw: Mapping[str, Any]) -> PidSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    return PidSpec(pid=int(raw["pid"]),
                   interval=fields.dur(raw.get("interval"), DEFAULT_INTERVAL),
                   force=bool(raw.get("force", False)))


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """No checks beyond the shared ones (durations) for ``pid``."""
    return []


EAGER = True
"""``observe`` needs no asyncio task until it waits (a ``/proc`` read; only the first
check writes the marker in a worker thread): ``sources.registry.EAGER``."""

MAX_PID = 4194304
"""The largest pid Linux can give (``PID_MAX_LIMIT``; the schema's ``source.pid`` maximum)."""

ADD = AddFlag("--watch-pid", "PID", "Fire when process PID exits.", integer=True,
                     interval=True)
"""``monitors add --watch-pid PID [--interval D] [--force]``."""


def from_flag(value: int, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--watch-pid PID``: a pid that is not alive is
    refused unless ``force`` (then ``force: true`` is written).

    Raises:
        errors.UsageError: not a process id, or not running without ``force``.
    """
    if not 1 <= value <= MAX_PID:
        raise errors.UsageError(f"--watch-pid: {value} is not a process id (1..{MAX_PID})")
    dead = not alive(value)
    if dead and not force:
        raise errors.UsageError(
            f"--watch-pid: process {value} is not running; refusing to arm a "
            "watch on a dead pid (pass --force when it is about to be spawned)"
        )
    return {"type": PidSpec.TYPE, "pid": value, "interval": interval,
            "force": True if dead else None}

def alive(pid: int) -> bool:
    """``processes.alive``: the one liveness rule, shared with ``add --watch-pid``."""
    from reconciler import processes

    return processes.alive(pid)


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Check ``source.pid`` once (see the module docstring).

    Raises:
        errors.SourceError: kind ``dead`` (permanent) when arming on a dead pid
            without ``force``; kind ``config`` (permanent) for a pid out of range.
    """
    import asyncio

    from reconciler import processes

    spec = monitor.source
    assert isinstance(spec, PidSpec)
    pid = spec.pid
    if not 0 < pid <= processes.PID_MAX:
        raise errors.SourceError(f"pid {pid} is outside 1-{processes.PID_MAX}", kind="config",
                                 permanent=True)
    force = spec.force
    store = ctx.store
    marker = store.pid_marker(monitor.name) if store is not None else None
    seen = marker is not None and marker.get("pid") == pid
    recorded = marker.get("startTime") if marker is not None and seen else None
    if alive(pid):
        started = processes.start_time(pid)
        if isinstance(recorded, int) and started is not None and started != recorded:
            return Observation(EXITED, {"pid": pid, "reused": True})
        # First seen (or a marker written before start times were recorded): remember it.
        fresh = not seen or (recorded is None and started is not None)
        if fresh and store is not None and not ctx.dry_run:
            await asyncio.to_thread(store.set_pid_marker, monitor.name, pid, time.time(),
                                    start_time=started)
        return Observation(RUNNING, {"pid": pid})
    if seen:
        return Observation(EXITED, {"pid": pid})
    if force:
        return Observation(NOT_YET_SPAWNED, {"pid": pid})
    raise errors.SourceError(
        f"pid {pid} is not running; refusing to watch a dead pid "
        "(set force: true when the process is about to start)",
        kind="dead",
        permanent=True,
    )
