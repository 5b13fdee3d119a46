"""Generated overlays: pause and placement patches on top of a monitor (DESIGN.md §2).

An overlay file (``monitors.d/overlays/<monitor>.yml``) names one monitor and
carries a ``pause`` (reason, optional ``until`` expiry) and/or a ``pin``
(``device`` or ``devices``, which replaces the monitor's own placement). This
module reads and validates one overlay file; ``resolve`` applies overlays to the
resolved monitors. No writing here (the overlay commands own that).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from reconciler import durations
from reconciler.config import problems as P
from reconciler.config import validate, yamlload
from reconciler.config.problems import Problem
from reconciler.model import Pause, Severity


@dataclass(frozen=True)
class Overlay:
    """One valid overlay file.

    Attributes:
        monitor: the monitor it patches.
        path: the overlay file.
        pause: the pause it applies, or None.
        pin: ``{"device": str}`` or ``{"devices": [str, ...]}`` replacing the
            monitor's placement, or None.
        line, col: 1-based position of the ``monitor`` value (for messages).
        until_pos: 1-based (line, col) of ``pause.until`` (for the expiry warning).
    """

    monitor: str
    path: Path
    pause: Pause | None
    pin: dict[str, Any] | None
    line: int = 1
    until_pos: tuple[int, int] = (1, 1)
    col: int = 1


def parse_until(text: str) -> datetime:
    """Parse a pause's ``until``: an ISO-8601 date-time with a time zone, or a date
    (midnight UTC). ``Z`` is accepted for UTC.

    Raises:
        durations.OutOfRange: later than ``durations.LATEST`` or earlier than
            ``durations.EARLIEST`` (a ``ValueError``).
        ValueError: not ISO-8601, or a date-time without a time zone.
    """
    text = text.strip()
    if len(text) == 10:
        moment = datetime.combine(date.fromisoformat(text), time(0, 0), tzinfo=UTC)
    else:
        moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("a date-time needs a time zone (e.g. 2026-12-01T09:00:00Z)")
    durations.check_time(moment, text)
    return moment


def is_expired(pause: Pause, now: datetime) -> bool:
    """True when ``pause.until`` is set, parses, and is at or before ``now`` (aware).

    An unparseable ``until`` is never expired (``read`` reports it as an error).
    """
    if not pause.until:
        return False
    try:
        return parse_until(pause.until) <= now
    except ValueError:
        return False


def read(path: Path, *, file: str | None = None) -> tuple[Overlay | None, list[Problem]]:
    """Read and validate one overlay file.

    Args:
        path: the overlay file.
        file: the name shown in problems (default ``str(path)``).

    Returns:
        ``(overlay, problems)``; ``overlay`` is None when the file has errors.
        Never raises on bad input. Expiry is not judged here (``is_expired``).
    """
    shown = file if file is not None else str(path)
    doc, problems = yamlload.load(path, file=shown)
    if doc is None:
        return None, problems
    return from_document(doc, path, problems)


def from_document(doc: yamlload.Document, path: Path,
                  problems: list[Problem]) -> tuple[Overlay | None, list[Problem]]:
    """Validate a parsed overlay ``doc`` (read from ``path``) and build the ``Overlay``.

    A field that already has a problem from the YAML reader (a tag, a duplicate key) gets
    no second one (as in monitor files): ``until: !!bool x`` is its ``yaml-tag`` error
    only, not also ``bad-until``."""
    broken = {p.field for p in problems}
    problems = problems + [p for p in validate.check(doc, kind="overlay")
                           if p.field not in broken]
    data = doc.data
    monitor = data.get("monitor")
    stem = path.stem
    if isinstance(monitor, str) and monitor != stem:
        line, col = doc.position(("monitor",))
        problems.append(P.error(doc.file, line, col, "monitor",
                                f"overlay for {monitor!r} is in {path.name}; overlay files are "
                                f"named after their monitor ({monitor}.yml)", "name-mismatch"))
    pause_raw = data.get("pause")
    pause = None
    if isinstance(pause_raw, dict):
        until = pause_raw.get("until")
        if isinstance(until, str) and "pause.until" not in broken:
            try:
                parse_until(until)
            except durations.OutOfRange as e:
                line, col = doc.position(("pause", "until"))
                problems.append(P.error(doc.file, line, col, "pause.until", str(e), "bad-until"))
            except ValueError as e:
                line, col = doc.position(("pause", "until"))
                problems.append(P.error(doc.file, line, col, "pause.until",
                                        f"{until!r} is not an ISO-8601 date-time with a time zone:"
                                        f" {e}", "bad-until"))
        pause = Pause(
            reason=str(pause_raw.get("reason") or ""),
            until=until if isinstance(until, str) else None,
            author=str(pause_raw.get("author") or ""),
            created=str(pause_raw.get("created") or ""),
        )
    if any(p.severity is Severity.ERROR for p in problems):
        return None, problems
    pin = data.get("pin")
    line, col = doc.position(("monitor",))
    return Overlay(str(monitor), path, pause, dict(pin) if isinstance(pin, dict) else None,
                   line, doc.position(("pause", "until")), col), problems
