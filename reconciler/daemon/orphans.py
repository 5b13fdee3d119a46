"""Process groups a killed daemon left behind: recorded while it runs, killed at the next start.

A clean stop kills every group a poll, command, run or routine started
(``processes.finish``). A ``kill -9`` of the daemon does not: its groups live on under
init, and the next daemon starts them again, so each runs twice. While the daemon
runs, ``Recorder`` (installed as ``processes.tracker``) keeps every live group in
``<state>/children.json``::

    {"groups": [{"pgid": 4242, "pid": 4242, "start": 183745}]}

``start`` is the leader's start time (field 22 of ``/proc/<pid>/stat``, clock ticks
since boot; ``processes.start_time``). The file is replaced atomically at most once a
second while groups start and end (``Recorder``; ``reconciler.atomic``, not fsynced: a
power loss ends the groups too), and is empty after a clean stop. At start (under the
state lock, so never another live daemon's groups) ``reap`` SIGKILLs each recorded group
whose leader is alive with the recorded start time; a leader gone or with another start
time (its pid reused) is skipped: a process group id is only ever the pid of its first
leader. Linux only (``/proc``); elsewhere nothing is recorded or killed.

PR_SET_PDEATHSIG is not used: it would kill only the direct child (its group's other
members live on, and the leader's start time would no longer identify them), it
fires when the forking *thread* exits, and setting it needs a ``preexec_fn``, which is
unsafe in a process with threads (the daemon's ``asyncio.to_thread`` workers).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from reconciler import atomic, processes

FILE = "children.json"
WRITE_DELAY = 1.0
"""Seconds between a change of the live groups and its write (``Recorder``)."""
log = logging.getLogger("monitors.daemon")


class Recorder:
    """The live process groups of this daemon, mirrored to ``<state_dir>/children.json``.

    A ``processes.Tracker``: ``started``/``ended`` never raise; a failed write is
    logged once (until a write succeeds again) and the groups are kept in memory.

    Writes are coalesced: a change schedules one write ``delay`` seconds later on the
    running event loop (at once when no loop runs), which writes the groups as they are
    then, and only when they differ from the last ones written. So a poll's short-lived
    command costs no write at all, and the file is rewritten at most once per ``delay``
    however many commands run. The price: a group started and killed with the daemon
    (``kill -9``) within ``delay`` seconds may be missing from the file.

    Args:
        state_dir: where ``children.json`` lives.
        delay: seconds between a change and its write.
    """

    def __init__(self, state_dir: Path, *, delay: float = WRITE_DELAY) -> None:
        self.path = state_dir / FILE
        self.groups: dict[int, int] = {}  # pgid (= leader pid) -> leader start time
        self.delay = delay
        self._written: dict[int, int] | None = None
        self._pending = False
        self._failing = False

    def started(self, pid: int, start: int | None = None) -> None:
        """Record the group ``pid`` with its leader's start time (``start``, else read
        now; unknown: not recorded)."""
        if start is None:
            start = processes.start_time(pid)
        if start is not None:
            self.groups[pid] = start
            self._schedule()

    def ended(self, pid: int) -> None:
        """Forget the group ``pid`` (killed by ``processes.finish``)."""
        if self.groups.pop(pid, None) is not None:
            self._schedule()

    def _schedule(self) -> None:
        if self._pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._pending = True
        loop.call_later(self.delay, self._due)

    def _due(self) -> None:
        self._pending = False
        self.flush()

    def flush(self) -> None:
        """Write the groups now when they differ from the last ones written."""
        if self.groups != self._written:
            self._write()

    def _write(self) -> None:
        groups = [{"pgid": pid, "pid": pid, "start": start}
                  for pid, start in sorted(self.groups.items())]
        try:
            atomic.write_bytes(self.path, atomic.dumps({"groups": groups}), durable=False)
        except OSError as e:
            if not self._failing:
                log.warning("cannot record child process groups in %s: %s", self.path,
                            e.strerror or e)
            self._failing = True
        else:
            self._failing = False
            self._written = dict(self.groups)


def recorded(state_dir: Path) -> list[tuple[int, int, int]]:
    """``(pgid, pid, start)`` of each group in ``<state_dir>/children.json``; ``[]`` when
    it is missing or unreadable (never raises)."""
    try:
        data = json.loads((state_dir / FILE).read_bytes())
        out = [(int(g["pgid"]), int(g["pid"]), int(g["start"])) for g in data["groups"]]
    except (OSError, ValueError, TypeError, KeyError):
        return []
    return [g for g in out if 0 < g[0] <= processes.PID_MAX and 0 < g[1] <= processes.PID_MAX]


def reap(state_dir: Path) -> int:
    """SIGKILL each group recorded in ``state_dir`` whose leader still runs with the
    recorded start time; return how many were killed. Call it holding the state lock."""
    killed = 0
    for pgid, pid, start in recorded(state_dir):
        if processes.start_time(pid) != start or not processes.alive(pid):
            continue  # gone, or the pid now belongs to another process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
            killed += 1
    return killed


@contextlib.contextmanager
def tracking(state_dir: Path) -> Iterator[Recorder]:
    """Kill what a previous daemon left (``reap``, one log line when any), then record
    every group this daemon starts until the block ends (``processes.tracker``)."""
    killed = reap(state_dir)
    if killed:
        log.info("killed %d process group%s left running by a daemon that did not stop "
                 "cleanly", killed, "" if killed == 1 else "s")
    recorder = Recorder(state_dir)
    recorder._write()  # the old list is handled: start empty
    previous, processes.tracker = processes.tracker, recorder
    try:
        yield recorder
    finally:
        processes.tracker = previous
        recorder.flush()  # a clean stop leaves the file empty (the loop has ended)
