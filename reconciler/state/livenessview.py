"""What ``list`` and ``view`` show of a monitor's liveness (``liveness_view``), computed
at read time from the heartbeat ``state.liveness`` keeps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler import durations
from reconciler.conditions import registry as condition_registry
from reconciler.model import Monitor
from reconciler.sources import registry as source_types
from reconciler.state import liveness as liveness_mod
from reconciler.state.liveness import LIVENESS_FLUSH_INTERVAL


def liveness_view(
    liveness: Mapping[str, Any] | None,
    monitor: Monitor,
    now: float,
    *,
    owned: bool = True,
    slack: float = LIVENESS_FLUSH_INTERVAL,
    running: bool = True,
    write_error: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``list`` and ``view`` show for a monitor's liveness, computed at read time.

    Args:
        liveness: ``Store.liveness(name)`` (None: never checked).
        monitor: the monitor (its ``active`` flag and ``source.interval``).
        now: Unix seconds.
        owned: this device evaluates the monitor.
        slack: extra age allowed for the liveness flush interval (seconds).
        running: a daemon runs an evaluator for it right now (False for a paused,
            auto-paused, refused or not-running monitor: never STALLED).
        write_error: the daemon's ``Store.write_errors()`` entry for the monitor
            (``error``, ``since``): its checks run but cannot be recorded, so the
            files are stale; shown instead of STALLED (status ``error``).

    Returns:
        ``{"status": "never"|"ok"|"error"|"stalled", "stalled": bool, "text": str}``
        plus the liveness keys (``lastCheckedAt``, ``checkCount``, ``lastError``,
        ``consecutiveErrors``, ``lastFiredAt``, ``fireCount``). STALLED means enabled,
        owned, running, and the last check is more than three intervals (plus ``slack``) old.
    """
    view: dict[str, Any] = {**liveness_mod.fresh(liveness), "stalled": False}
    del view["version"]
    last = view["lastCheckedAt"]
    count = view["checkCount"]
    if write_error and running:
        since = write_error.get("since")
        ago = f" for {durations.ago(now - float(since))}" if isinstance(since, int | float) \
            else ""
        view.update(status="error", writeError=write_error.get("error"),
                    text=f"error: cannot write state{ago}: {write_error.get('error')} "
                    "(checks go on; what is shown here is from before)")
        return view
    if not count or last is None:
        view.update(status="never",
                    text=source_types.waiting_text(monitor.source_type) or "never polled")
        return view
    ago = durations.ago(now - float(last))
    interval = monitor.source.interval
    if (
        monitor.active
        and owned
        and running
        and isinstance(interval, int | float)
        and now - float(last) > 3 * float(interval) + slack
    ):
        view.update(status="stalled", stalled=True, text=f"STALLED · last poll {ago} ago")
        return view
    if view["consecutiveErrors"]:
        view.update(status="error", text=f"checked {count}x · error: {view['lastError']}")
        return view
    if view["fireCount"] and view["lastFiredAt"] is not None:
        fired = durations.ago(now - float(view["lastFiredAt"]))
        tail = f"fired {view['fireCount']}x, last {fired} ago"
    else:
        tail = condition_registry.quiet(monitor.condition)
    view.update(status="ok", text=f"checked {count}x · last {ago} ago · {tail}")
    return view
