"""aiohttp's own log lines (``aiohttp.server``, ``aiohttp.web``) as one line each.

A malformed request makes aiohttp log a traceback; for the daemon it is the client's
problem, not its own: ``quiet_aiohttp`` turns such a record into one INFO line.
"""

from __future__ import annotations

import logging


class _OneLine(logging.Filter):
    """aiohttp's own log (a malformed request logs a traceback): one line, no traceback,
    at INFO: a bad request is the client's problem, not the daemon's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg = f"http: {record.getMessage()}: {type(exc).__name__}: {exc}"
            record.msg = record.msg.replace("\n", " ")[:300]
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_aiohttp() -> None:
    """Install ``_OneLine`` on aiohttp's server loggers (once)."""
    for name in ("aiohttp.server", "aiohttp.web"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OneLine) for f in logger.filters):
            logger.addFilter(_OneLine())
