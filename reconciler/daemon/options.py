"""How the daemon runs: its options (``Options``), what else it may serve
(``Service``), ``[daemon] resync``, the log set-up, a one-shot run's garbage
collection (``one_shot_gc``), the interpreter lock's switch interval
(``favour_event_loop``) and the daemon's heap once it serves (``settle_heap``). Read
by ``monitors run`` and by a SIGHUP reload (``daemon.reload``); the life cycle itself
is ``daemon.main``."""

from __future__ import annotations

import atexit
import gc
import sys
from dataclasses import dataclass
from typing import Any, Protocol

from reconciler import errors, settings
from reconciler.daemon import logformat, watch

DEFAULT_ONCE_WAIT = 30.0
"""Seconds ``run --once`` waits for first polls and then for dispatches (``--wait``)."""
ONE_SHOT_GC_THRESHOLD = 50_000
"""The cyclic garbage collector's first threshold during ``run --once`` (``one_shot_gc``;
CPython's default is 700)."""

SWITCH_INTERVAL = 0.0005
"""Seconds a worker thread keeps the interpreter lock once the event loop asks for it
(``sys.setswitchinterval``; CPython's default is 0.005)."""


class Service(Protocol):
    """Something the daemon serves besides the control socket (the HTTP server,
    ``server.app.HttpServer``): started once the first reconcile ran and before the
    ready line, closed at stop before the evaluators."""

    async def start(self) -> None:
        """Start serving.

        Raises:
            errors.MonitorsError: it cannot (one line; the daemon exits 1).
        """

    async def close(self) -> None:
        """Stop serving (never raises)."""


@dataclass(frozen=True, slots=True)
class Options:
    """How the daemon runs.

    Attributes:
        once: one reconcile, one poll of every owned monitor, drain, exit.
        once_wait: seconds ``--once`` waits for first polls and then for dispatches.
        resync: seconds between periodic resyncs (``[daemon] resync`` in monitors.toml).
        debounce: quiet seconds after a file event before reconciling.
        allow_mass_stop: never hold stops (``--allow-mass-stop``).
        resync_fixed: ``resync`` came from ``--resync``: a SIGHUP reload keeps it.
    """

    once: bool = False
    once_wait: float = DEFAULT_ONCE_WAIT
    resync: float = watch.DEFAULT_RESYNC
    debounce: float = watch.DEFAULT_DEBOUNCE
    allow_mass_stop: bool = False
    resync_fixed: bool = False  # --resync given: a SIGHUP reload keeps it


def setup_logging(*, stream: Any = None, timestamps: bool = True, level: str = "info",
                  fmt: str = "text") -> None:
    """One line per event on stderr: ``HH:MM:SS level message`` (full date in a log
    file), or one JSON object a line (``fmt="json"``); see ``daemon.logformat.setup``."""
    logformat.setup(stream=stream, timestamps=timestamps, level=level, fmt=fmt)


def one_shot_gc() -> None:
    """Collect cyclic garbage rarely for the rest of a one-shot run (``run --once``),
    whose process ends with it.

    Such a run loads its modules and monitors, polls once and exits: nearly all it
    allocates lives until the end, and each young-generation collection (every 700 net
    allocations by default) walks it again for nothing: about 50 collections and 7-9 ms
    of CPU in a run of 100 command monitors. The first threshold is raised to
    ``ONE_SHOT_GC_THRESHOLD`` (as mypy does for a build); reference counting still
    frees everything that is not a cycle at once. It is not lowered again at the end:
    the objects counted meanwhile would then be collected right away, once more for
    nothing.

    The heap is also frozen (``gc.freeze``, an ``atexit`` handler: after the run has
    returned and its threads were joined) before the interpreter's final collection,
    which would otherwise walk every object once more, about 25 ms of CPU after a run
    of 100 command monitors, for memory the process gives back as it ends.
    Module teardown still finalizes what is not in a cycle; nothing durable is left to
    a finalizer (every state write is complete, and fsynced where it must be, before
    the run returns). The long-running daemon keeps the thresholds (``settle_heap``)."""
    gc.set_threshold(ONE_SHOT_GC_THRESHOLD, *gc.get_threshold()[1:])
    atexit.unregister(gc.freeze)  # registered once, however many runs (tests run several)
    atexit.register(gc.freeze)


def favour_event_loop() -> None:
    """Let the event loop take the interpreter lock back from a worker thread within
    ``SWITCH_INTERVAL`` (the long-running daemon; ``monitors run`` without ``--once``).

    The daemon's worker threads (file reads, state writes, the ``/metrics`` render)
    run Python code; when the loop's timer for a poll falls due while one of them holds
    the lock, the loop waits for CPython's switch interval, 5 ms by default, and the
    poll starts that late. Measured with ``bench/http_load.py --rounds 4`` (1,000
    monitors, 200 HTTP clients, 2 cores, medians of interleaved runs): poll lateness
    p99 under load 8.2-8.8 ms at 5 ms, 6.2 ms at 1 ms, 4.5 ms at 0.5 ms, 5.2 ms at
    0.2 ms (more hand-offs cost more than they save); no-load p99 2.0 ms in each."""
    sys.setswitchinterval(SWITCH_INTERVAL)


def settle_heap() -> None:
    """Once the daemon serves (its monitors loaded and started; ``monitors run`` calls it
    at the ready line): collect once, then move every object alive into the permanent
    generation (``gc.freeze``), which the cyclic collector no longer walks.

    A full collection walks every object the process holds, and runs on whichever
    thread allocates when it falls due, the event loop's mostly: a daemon with 1,000
    monitors serving HTTP took 95-136 ms per full collection, measured with ``gc``
    callbacks under ``bench/http_load.py``: a stall of the loop in which every poll due
    started that late. What the daemon builds at start (its modules, monitors,
    evaluators, schemas) lives until it stops; frozen, a full collection walks only
    what was allocated since. Objects made later (monitors added by a reconcile,
    requests) are collected as before. Nothing frozen was garbage (the collection just
    before made sure of it); a frozen object that later becomes part of a garbage cycle
    (say, part of the first reconcile's state, once replaced) is kept: at most what was
    alive at the ready line, once. The collection itself takes about as long as one
    full collection (about 0.1 s with 1,000 monitors), once, at start. The pattern is
    CPython's documented use of ``gc.freeze`` for long-lived processes."""
    gc.collect()
    gc.freeze()


def resync_seconds(cfg: settings.Settings) -> float:
    """``[daemon] resync`` from monitors.toml (a duration), default 60 s.

    Raises:
        errors.ConfigError: not a duration.
    """
    from reconciler import durations

    raw = cfg.section("daemon").get("resync")
    if raw is None:
        return watch.DEFAULT_RESYNC
    try:
        return max(1.0, durations.parse(raw))
    except ValueError as e:
        raise errors.ConfigError(f"monitors.toml: daemon.resync: {e}") from e
