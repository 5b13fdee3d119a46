"""Stop the daemon that holds a state directory (``monitors stop``).

The daemon writes its pid into ``<state>/daemon.lock`` and holds an flock on it for
its whole life; SIGTERM makes it stop its evaluators, finish in-flight state writes,
release the lock and exit 0. No click here.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from reconciler import errors
from reconciler.state import lock


@dataclass(frozen=True, slots=True)
class Stopped:
    """The outcome of ``stop``.

    Attributes:
        pid: the daemon's pid, or None when no daemon held the state directory.
        stopped: True when the lock was released within the wait.
    """

    pid: int | None
    stopped: bool


def stop(state_dir: Path, *, wait: float = 30.0, poll: float = 0.1) -> Stopped:
    """Send SIGTERM to the daemon holding ``state_dir`` and wait until it lets go.

    Args:
        state_dir: the daemon's state directory.
        wait: at most this many seconds to wait for the lock to be released.
        poll: seconds between checks of the lock.

    Returns:
        ``Stopped(None, True)`` when no daemon holds it (nothing to do).

    Raises:
        errors.StateError: the lock is held but its pid cannot be read or signalled.
    """
    if not lock.is_locked(state_dir):
        return Stopped(None, True)
    pid = lock.holder_pid(state_dir)
    if pid is None:
        raise errors.StateError(f"{state_dir / lock.LOCK_FILE}: held, but names no pid")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # exited between the probe and the signal
    except PermissionError as e:
        raise errors.StateError(f"daemon pid {pid}: not allowed to stop it: {e.strerror}") from e
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if not lock.is_locked(state_dir):
            return Stopped(pid, True)
        time.sleep(poll)
    return Stopped(pid, not lock.is_locked(state_dir))
