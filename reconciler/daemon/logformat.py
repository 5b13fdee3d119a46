"""The daemon's log lines: text for people, or one JSON object a line for collectors.

``monitors run --log-format json`` writes each record as one JSON object (JSON Lines,
as ``journalctl -o json``, Vector and Loki take it) with the keys ``time`` (RFC 3339,
UTC, milliseconds), ``level`` (lower case), ``logger`` (``monitors.daemon`` ...),
``message``, and ``exception`` (the formatted traceback) when there is one. A message
never spans lines in either format's records (JSON escapes newlines).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any, TextIO

from reconciler.render import terminal

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")


class EscapingFormatter(logging.Formatter):
    """A ``logging.Formatter`` for a text log whose output is ``terminal.escape``d, so a
    logged observation cannot drive the terminal that shows the log. It runs after every
    handler filter (the redactor's ``LogFilter`` sees the raw text first). Here, not in
    ``render.terminal``: ``logging`` costs the CLI's start-up ~2 ms."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted line (``logging.Formatter.format``), escaped."""
        return terminal.escape(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """``{"time", "level", "logger", "message"[, "exception"]}`` as one line."""
        at = dt.datetime.fromtimestamp(record.created, dt.UTC)
        doc: dict[str, Any] = {
            "time": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # the redacting log filter keeps only the (redacted) text
            doc["exception"] = record.exc_text
        return json.dumps(doc, ensure_ascii=False)


def setup(*, stream: TextIO | None = None, timestamps: bool = True, level: str = "info",
          fmt: str = "text") -> None:
    """Send the ``monitors.*`` loggers to ``stream`` (default stderr), one line per event.

    Args:
        timestamps: text format: the full date (a log file) instead of ``HH:MM:SS``.
        level: the lowest level logged, one of ``LEVELS``.
        fmt: ``text`` (``HH:MM:SS level message``) or ``json`` (``JsonFormatter``).

    Raises:
        ValueError: an unknown ``level`` or ``fmt``.
    """
    if level not in LEVELS or fmt not in FORMATS:
        raise ValueError(f"log level {level!r} / format {fmt!r}: expected one of "
                         f"{', '.join(LEVELS)} / {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        datefmt = "%Y-%m-%d %H:%M:%S" if timestamps else "%H:%M:%S"
        handler.setFormatter(EscapingFormatter("%(asctime)s %(levelname)-7s %(message)s",
                                               datefmt=datefmt))
    root = logging.getLogger("monitors")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
