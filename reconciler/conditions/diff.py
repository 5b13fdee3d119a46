"""What changed between two observations: a bounded unified diff. Pure.

Events carry the previous and the current observation and, between them, a unified
diff (``{{ diff }}`` in templates; the default ``notify`` message appends it, as
urlwatch's reports do). The diff is bounded: inputs are the events' excerpts
(``events.EXCERPT_CHARS``), one line of context, and at most ``DIFF_CHARS``
characters of output.
"""

from __future__ import annotations

import difflib

DIFF_CHARS = 2000
"""Longest diff kept in an event (characters); a cut says how many lines were left out."""

CONTEXT_LINES = 1
"""Unchanged lines shown around each change."""


def unified(previous: str | None, current: str, *, limit: int = DIFF_CHARS) -> str:
    """The unified diff from ``previous`` to ``current`` (``--- previous`` / ``+++
    current`` headers, ``CONTEXT_LINES`` of context), cut to ``limit`` characters at a
    line boundary; ``""`` when there is no previous observation or nothing differs.

    Follows the format of ``difflib.unified_diff`` (and so of ``diff -u``)."""
    if previous is None or previous == current:
        return ""
    lines = list(difflib.unified_diff(previous.splitlines(), current.splitlines(),
                                      "previous", "current", n=CONTEXT_LINES, lineterm=""))
    out: list[str] = []
    size = 0
    for i, line in enumerate(lines):
        if size + len(line) + 1 > limit:
            out.append(f"… ({len(lines) - i} more diff lines)")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)


def first_change(diff: str) -> str:
    """The first added or removed line of a ``unified`` diff, with its ``+``/``-``
    (``""`` when none): what ``monitors runs`` shows."""
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "@@")):
            continue
        if line.startswith(("+", "-")):
            return line
    return ""
