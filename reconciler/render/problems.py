"""Render lint problems as ``text``, ``json`` or ``github`` workflow annotations.

* text: one ``file:line:col: severity: field: message [rule]`` line per problem,
  sorted, then ``N monitors, E errors, W warnings``.
* json: a list of ``{file, line, column, severity, rule, field, message}`` objects.
* github: ``::error file=F,line=L,col=C,title=RULE::MESSAGE`` per problem (GitHub
  Actions workflow commands; info becomes ``notice``), then the summary line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.model import Severity
from reconciler.render import terminal

FORMATS = ("text", "json", "github")


def summary(problems: Sequence[Problem], *, monitors: int) -> str:
    """``N monitors, E errors, W warnings`` (singular forms for 1)."""
    errors, warnings = P.counts(problems)

    def n(count: int, word: str) -> str:
        return f"{count} {word}" if count == 1 else f"{count} {word}s"

    return f"{n(monitors, 'monitor')}, {n(errors, 'error')}, {n(warnings, 'warning')}"


def _text(problems: Sequence[Problem], monitors: int) -> str:
    lines = [p.format() for p in sorted(problems)]
    lines.append(summary(problems, monitors=monitors))
    return terminal.escape("\n".join(lines) + "\n")


def _json(problems: Sequence[Problem], monitors: int) -> str:
    rows = [{"file": p.file, "line": p.line, "column": p.col, "severity": p.severity.value,
             "rule": p.rule, "field": p.field, "message": p.message} for p in sorted(problems)]
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _github(problems: Sequence[Problem], monitors: int) -> str:
    lines = []
    for p in sorted(problems):
        props = (f"file={_escape_property(p.file)},line={p.line},col={p.col},"
                 f"title={_escape_property(p.rule)}")
        where = f"{p.field}: " if p.field else ""
        lines.append(f"::{_GITHUB_LEVEL[p.severity]} {props}::{_escape_data(where + p.message)}")
    lines.append(summary(problems, monitors=monitors))
    return "\n".join(lines) + "\n"


_RENDERERS: dict[str, Callable[[Sequence[Problem], int], str]] = {
    "text": _text,
    "json": _json,
    "github": _github,
}


def render(problems: Sequence[Problem], *, fmt: str, monitors: int) -> str:
    """Render ``problems`` in format ``fmt`` (one of ``FORMATS``).

    Raises:
        ValueError: an unknown format.
    """
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
    return renderer(problems, monitors)
