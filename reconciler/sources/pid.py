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

import asyncio
import time
from typing import TYPE_CHECKING

from reconciler import errors, processes
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

PID_MAX = processes.PID_MAX
alive = processes.alive  # the one liveness rule, shared with ``add --watch-pid``

RUNNING = "running"
EXITED = "exited"
NOT_YET_SPAWNED = "notyetspawned"


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Check ``source.pid`` once (see the module docstring).

    Raises:
        errors.SourceError: kind ``dead`` (permanent) when arming on a dead pid
            without ``force``; kind ``config`` (permanent) for a pid out of range.
    """
    spec = monitor.source
    pid = int(spec["pid"])
    if not 0 < pid <= PID_MAX:
        raise errors.SourceError(f"pid {pid} is outside 1-{PID_MAX}", kind="config",
                                 permanent=True)
    force = bool(spec.get("force"))
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
