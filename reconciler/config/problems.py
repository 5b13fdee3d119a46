"""Problems are data: one ``Problem`` per finding, collected across all files, rendered later.

A problem names the file, the 1-based line and column of the offending YAML node,
the dotted field path (``source.interval``; empty for whole-file problems), a
message, a severity and a stable rule id (see ``RULES``; the README documents
them). Nothing here prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from reconciler.model import Severity

# Stable rule ids -> one-line description (the README's table is generated from this).
RULES: dict[str, str] = {
    "unreadable": "the file cannot be read (permissions, a directory, vanished)",
    "file-too-large": "the file is larger than 1 MiB",
    "encoding": "the file is not UTF-8",
    "empty-file": "the file holds no YAML document",
    "yaml-syntax": "the YAML does not parse (or holds more than one document)",
    "tab": "a tab character where YAML needs spaces",
    "yaml-tag": "an explicit tag (!!python/..., !custom) that monitors never accept, or a "
                "core tag on a value not of its type (!!int abc)",
    "yaml-aliases": "anchors and aliases expand past the limit (alias bomb) or recurse",
    "too-many-values": "a document holds more than 10,000 values (lists, mappings and "
                       "scalars), no alias involved",
    "yaml-depth": "lists and mappings nested more than 64 levels deep",
    "duplicate-key": "a key appears twice in one mapping, or beside a merge (<<) that also "
                     "sets it (YAML would keep one silently)",
    "yaml11-bool": "unquoted yes/no/on/off/y/n: YAML 1.1 reads a boolean where text was meant",
    "yaml11-octal": "unquoted 0777: YAML 1.1 reads an octal number",
    "yaml11-sexagesimal": "unquoted 1:30: YAML 1.1 reads a base-60 number (90)",
    "top-level": "the document is not a mapping (a list or a scalar at the top)",
    "schema": "the document does not match the JSON Schema (type, enum, required, ...)",
    "unknown-field": "a field the schema does not know (with a did-you-mean suggestion)",
    "bad-filename": "the file name is not a valid monitor name (<name>.yml), or not valid UTF-8",
    "name-mismatch": "`name` (or an overlay's `monitor`) differs from the file stem",
    "duplicate-name": "two files in one layer define the same monitor (or overlay), or the "
                      "fleet file lists a device twice",
    "duplicate-fingerprint": "two monitors watch, decide and do the same thing",
    "bad-regex": "a regex (match, dedupeKey, ignore) does not compile with Python re",
    "bad-threshold": "condition.fireAfter asks for more matching checks (count) than it "
                     "looks at (within)",
    "bad-select": "a source.select JMESPath expression does not compile",
    "bad-duration": "a duration does not parse (500ms, 30s, 5m, 8h, 1d or integer seconds) "
                    "or is longer than 3650d",
    "interval-range": "an interval outside 500ms..7d",
    "bad-template": "a Jinja2 template (prompt, message) does not parse or names an unknown "
                    "variable",
    "unknown-reference": "an agent, routine or channel that monitors.toml does not define",
    "bad-command": "a run command's argv template is unusable (e.g. {prompt} inside an element)",
    "settings": "monitors.toml itself is invalid (agents, routines, channels)",
    "channel-url": "a channel's URL is not one Apprise accepts (checked without sending; "
                   "${NAME} parts stand in as placeholders)",
    "bad-until": "an overlay's pause.until is not an ISO-8601 date-time with a time zone, "
                 "or is later than 9000-01-01T00:00:00Z or earlier than 1970-01-01T00:00:00Z; "
                 "or a monitor's until is neither such a date-time nor a duration",
    "overlay-orphan": "an overlay names a monitor that no layer defines",
    "overlay-expired": "an overlay's pause has expired (the monitor runs again)",
    "shadowed-redundant": "a user monitor repeats the built-in it shadows (delete it)",
    "shadowed-diverged": "a user monitor shadows a built-in and differs from it",
    "coverage": "a match regex names only a success token: silence is not success",
    "ignored-path": "a layer holds a sub-directory, a dangling symlink, or a symlink to (or "
                    "a) device, FIFO or socket named *.yml: the loader never reads it",
    "unknown-device": "a device source or owner pin names a device the fleet file lacks",
    "owners-without-etcd": "a monitor names failover owners (owners:) but monitors.toml "
                           "has no [etcd] to take their leases in",
    "owners-unpolled": "a monitor with failover owners (owners:) has a stream or push "
                       "source: only polls are admitted by the lease, so it never fires",
    "bad-address": "a fleet device's address is not host:port or http(s)://host[:port], or "
                   "[http] listen is not host:port (port 1-65535)",
    "ca-file": "a fleet device's caFile is missing, unreadable or holds no PEM certificate, "
               "or is set for an address that is not https://",
    "bad-url": "a url does not parse (bad port, bad IPv6 literal, no host)",
    "system-modified": "a file in the pull-only system/ layer differs from what `monitors "
                       "system pull` recorded (move the change to monitors.d/ or an overlay)",
    "missing-layer": "the user layer, or a layer directory [layers] names, does not exist",
    "unsafe-permissions": "a file that can run commands (or monitors.toml with agents or "
                          "routines) is writable by, or owned by, another user",
    "completed": "a monitor that ended itself (until, stopAfter, stopWhen) still has its "
                 "file (`monitors remove --completed` removes it)",
    "internal-error": "a bug in monitors while checking this file (please report it); the "
                      "file counts as invalid and every other file is checked as usual",
}


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One finding: ``file:line:col: severity: field: message [rule]``.

    Attributes:
        file: the file as displayed (relative to the working directory when below it).
        line, col: 1-based position of the offending node (1, 1 for whole-file problems).
        field: dotted path of the field (``source.interval``, ``devices.1``); may be empty.
        message: what is wrong and, where possible, how to fix it.
        severity: error, warning or info.
        rule: a stable rule id from ``RULES``.

    Problems order by (file, line, col) first, so ``sorted()`` gives report order.
    """

    file: str
    line: int
    col: int
    field: str
    message: str
    severity: Severity
    rule: str

    def format(self) -> str:
        """Return ``path:line:col: severity: field: message [rule]`` (no ``field:`` when empty)."""
        where = f"{self.field}: " if self.field else ""
        return (
            f"{self.file}:{self.line}:{self.col}: {self.severity.value}: "
            f"{where}{self.message} [{self.rule}]"
        )


def error(file: str, line: int, col: int, field: str, message: str, rule: str) -> Problem:
    """Shorthand for an error-severity ``Problem``."""
    return Problem(file, line, col, field, message, Severity.ERROR, rule)


def warning(file: str, line: int, col: int, field: str, message: str, rule: str) -> Problem:
    """Shorthand for a warning-severity ``Problem``."""
    return Problem(file, line, col, field, message, Severity.WARNING, rule)


def info(file: str, line: int, col: int, field: str, message: str, rule: str) -> Problem:
    """Shorthand for an info-severity ``Problem``."""
    return Problem(file, line, col, field, message, Severity.INFO, rule)


def counts(problems: Iterable[Problem]) -> tuple[int, int]:
    """Return ``(errors, warnings)`` among ``problems`` (info is not counted)."""
    errors = warnings = 0
    for p in problems:
        if p.severity is Severity.ERROR:
            errors += 1
        elif p.severity is Severity.WARNING:
            warnings += 1
    return errors, warnings


def dotted(path: Iterable[str | int]) -> str:
    """Join an instance path as a dotted field name: ``("devices", 1)`` -> ``devices.1``."""
    return ".".join(str(p) for p in path)


def internal_error(file: str, exc: BaseException) -> Problem:
    """The ``internal-error`` problem for an exception raised while checking ``file``.

    The message is the exception's one-line summary (type and first line, capped at
    200 characters) and asks for a report: ``internal error: ValueError: ... (please
    report this: the other files are not affected)``. Position 1:1 (a whole-file
    problem).
    """
    lines = str(exc).strip().splitlines()
    summary = type(exc).__name__ + (f": {lines[0]}" if lines else "")
    if len(summary) > 200:
        summary = summary[:197] + "..."
    return error(file, 1, 1, "", f"internal error: {summary} (please report this: the "
                 f"other files are not affected)", "internal-error")


class guard:  # lower case: used like a function, ``with problems.guard(file, found):``
    """The per-file boundary of the config stage: an exception raised inside (any
    ``Exception``; bad input is a problem, never a raise, so this is a bug) does not
    propagate: it is logged with its traceback at debug level and appended to
    ``problems`` as ``file``'s ``internal-error`` (``internal_error``). ``failed`` tells
    whether one was caught, so the caller can count the file as invalid.
    ``KeyboardInterrupt`` and other ``BaseException``s pass through.
    """

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        self.failed = False

    def __enter__(self) -> guard:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if not isinstance(exc, Exception):
            return False
        import logging  # here: lint's start-up does without it (~2 ms)

        logging.getLogger("monitors.config").debug("%s: internal error while checking it",
                                                   self.file, exc_info=exc)
        self.problems.append(internal_error(self.file, exc))
        self.failed = True
        return True
