"""How the daemon runs: its options (``Options``), what else it may serve
(``Service``), ``[daemon] resync`` and the log set-up. Read by ``monitors run`` and by a
SIGHUP reload (``daemon.reload``); the life cycle itself is ``daemon.main``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from reconciler import errors, settings
from reconciler.daemon import logformat, watch

DEFAULT_ONCE_WAIT = 30.0
"""Seconds ``run --once`` waits for first polls and then for dispatches (``--wait``)."""


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
