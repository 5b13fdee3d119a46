"""The audit trail: ``<state>/audit.jsonl``, one JSON object a line per MCP tool call
and per CLI write command (``add``, ``remove``, ``edit``, ``pause``, ...).

Each line: ``{"version": 1, "at": ISO-8601 UTC, "caller": "mcp" | "cli", "client":
the MCP client's name (``clientInfo.name``) or null, "tool": tool or command name,
"arguments": {...} with secrets redacted, "outcome": "applied" | "refused: <reason>"
| "conflict" | "error: <line>"}``.

Appended with ``O_APPEND`` in a single ``write`` of one line (POSIX appends of one
write land whole and in order, so concurrent writers interleave lines, never bytes
of a line), file mode 0600 in the 0700 state directory. Never rewritten or rotated
here. Readers skip a line they cannot parse (a torn tail after a crash).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler import errors, timestamps
from reconciler.redaction import Redactor
from reconciler.state.layout import AUDIT_FILE

VERSION = 1
CALLERS = ("mcp", "cli")
MAX_VALUE = 2000
"""Characters kept of one argument string (a long prompt is cut, marked ``…``)."""


def path(state_dir: Path) -> Path:
    """``<state>/audit.jsonl``."""
    return state_dir / AUDIT_FILE


def _bounded(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE:
        return value[:MAX_VALUE] + "…"
    if isinstance(value, Mapping):
        return {str(k): _bounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(v) for v in value]
    return value


def entry(*, caller: str, tool: str, arguments: Mapping[str, Any], outcome: str,
          client: str | None = None, redactor: Redactor | None = None,
          at: float | None = None) -> dict[str, Any]:
    """One audit line as a dict: arguments cut to ``MAX_VALUE`` characters per string
    and redacted with ``redactor`` (every registered secret becomes ``***``), as is
    the outcome. ``at``: Unix seconds (default now)."""
    redact = redactor or Redactor()
    return {"version": VERSION, "at": timestamps.utc_micro(time.time() if at is None else at),
            "caller": caller, "client": client, "tool": tool,
            "arguments": redact.redact_value(_bounded(dict(arguments))),
            "outcome": redact.redact(outcome)}


def append(state_dir: Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one line to ``<state>/audit.jsonl`` (created 0600; the
    state directory 0700 when created here).

    Raises:
        errors.StateError: the state directory or the file cannot be written.
    """
    line = (json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
            + "\n").encode("utf-8")
    target = path(state_dir)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as e:
        raise errors.StateError(f"{target}: cannot append the audit record: "
                                f"{e.strerror or e}") from e


def read(state_dir: Path, *, limit: int | None = None) -> list[dict[str, Any]]:
    """The audit records, oldest first (the last ``limit`` when given); lines that are
    not a JSON object are skipped. No file: ``[]``.

    Raises:
        errors.StateError: the file exists but cannot be read.
    """
    target = path(state_dir)
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise errors.StateError(f"{target}: cannot read: {e.strerror or e}") from e
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return out[-limit:] if limit else out
