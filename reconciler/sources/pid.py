"""``pid``: is a process alive? ``running``, ``exited`` or ``notyetspawned``.

The default condition fires on ``exited`` (``config.normalize``). Arming rules
(from the original watch-pid model):

* a pid that is not alive when the watch has never seen it running is refused
  with a permanent check error, unless the source sets ``force: true``;
* a forced watch reports ``notyetspawned`` (never ``exited``) until a
  per-monitor marker (``Store.set_pid_marker``) has recorded the pid running
  once, so the first poll cannot read "not alive yet" as "exited", fire falsely
  and poison the baseline.

A zombie (exited, not yet reaped) counts as exited. A pid owned by another user
(``EPERM``) counts as running. A pid outside ``1..PID_MAX`` (0 and negative
numbers address process groups in ``kill(2)``) is a permanent check error of kind
``config``, never a foreign exception.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

PID_MAX = 4194304
"""Linux's largest ``pid_max`` (``kernel/pid.c``: ``PID_MAX_LIMIT``)."""

RUNNING = "running"
EXITED = "exited"
NOT_YET_SPAWNED = "notyetspawned"


def alive(pid: int) -> bool:
    """True when ``pid`` (``1..PID_MAX``) exists and is not a zombie."""
    if not 0 < pid <= PID_MAX:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # Field 3 (state) follows the parenthesised command name, which may contain spaces.
    state = stat.rsplit(")", 1)[-1].split()[:1]
    return state != ["Z"] and state != ["X"]


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
    if alive(pid):
        if not seen and store is not None and not ctx.dry_run:
            await asyncio.to_thread(store.set_pid_marker, monitor.name, pid, time.time())
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
