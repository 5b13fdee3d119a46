"""One monitor file's bytes -> its normalized monitor, or the problems that stop it.

``check`` reads, parses (``yamlload``), validates (``validate``, ``semantic`` and an
optional ``ActionCheck``) and normalizes (``normalize``) one file inside a
``problems.guard`` boundary; ``check_all`` runs it over many files, in forked worker
processes from ``PARALLEL_MIN`` files on when asked to.

Must not: look at other files (shadowing, overlays and duplicates are ``resolve``'s),
raise on bad input, or print.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.config import normalize, semantic, validate, yamlload
from reconciler.config import problems as P
from reconciler.config.files import FileKind
from reconciler.config.problems import Problem
from reconciler.model import Monitor, Scope, Severity

PARALLEL_MIN = 2000
"""From this many monitor files, ``load(jobs=None)`` checks them in worker processes."""


ActionCheck = Callable[[Mapping[str, Any]], list[tuple[str, str]]]
"""An extra static check of a schema-valid ``action`` mapping: ``(field, message)`` pairs
with dotted fields such as ``action.agent`` (``lint`` passes the actions' checks)."""


@dataclass(slots=True)
class Entry:
    """A valid monitor and the position of its ``source`` key (where a duplicate
    fingerprint is reported)."""

    monitor: Monitor
    source_pos: tuple[int, int]


Outcome = tuple[bytes, "Entry | None", list[Problem]]
"""What ``check`` gives for one file: the sha256 of its bytes (``b"-"`` when unread),
its entry or None, its problems."""


def check(item: tuple[Path, FileKind, str], action_check: ActionCheck | None = None) -> Outcome:
    """Read and check one monitor file: (sha256 of its bytes, entry or None, problems).
    Never raises: see ``problems.guard``."""
    path, kind, file = item
    scope = Scope.SYSTEM if kind == "system" else Scope.USER
    raw: bytes | None = None
    entry: Entry | None = None
    problems: list[Problem] = []
    with P.guard(file, problems):
        raw, more = yamlload.read(path, file=file)
        problems += more
        if raw is not None:
            entry, more = parse_monitor(raw, path=path, file=file, scope=scope,
                                        action_check=action_check)
            problems += more
    return (hashlib.sha256(raw).digest() if raw is not None else b"-"), entry, problems


def check_all(items: list[tuple[Path, FileKind, str]], jobs: int | None,
              action_check: ActionCheck | None) -> Iterator[Outcome]:
    """``check`` every item, in order; in forked worker processes when asked to."""
    one = functools.partial(check, action_check=action_check)
    if jobs is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        jobs = min(cpus, 4) if len(items) >= PARALLEL_MIN else 1
    if jobs <= 1 or len(items) < 2:
        return map(one, items)
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return map(one, items)
    with context.Pool(jobs) as pool:
        outcomes = pool.map(one, items, chunksize=max(1, len(items) // (jobs * 8)))
    return iter(outcomes)


_ACTION_RULES = {"prompt": "bad-template", "message": "bad-template", "agent": "unknown-reference",
                 "routine": "unknown-reference", "channel": "unknown-reference",
                 "command": "bad-command"}


def parse_monitor(raw: bytes, *, path: Path, file: str, scope: Scope,
                  action_check: ActionCheck | None = None) -> tuple[Entry | None, list[Problem]]:
    """Parse, validate and normalize one monitor file's bytes.

    The semantic checks (regexes, templates, durations, URLs, and ``action_check``'s
    references) run beside schema errors, on every field that is not itself wrong:
    their findings at or below a field that already has an error are dropped, so one
    run reports every independent problem and none twice.
    """
    doc, problems = yamlload.parse(raw, file=file)
    if doc is None:
        return None, problems
    broken = {p.field for p in problems}  # a duplicate key or tag already explains these
    problems += [p for p in validate.check(doc, kind="monitor") if p.field not in broken]
    wrong = {p.field for p in problems if p.field and p.severity is Severity.ERROR}
    more = semantic.check(doc, stem=path.stem)
    action = doc.data.get("action")
    if action_check is not None and isinstance(action, dict):
        for field_name, message in action_check(action):
            steps = tuple(field_name.split("."))
            line, col = doc.position(steps)
            more.append(P.error(file, line, col, field_name, message,
                                _ACTION_RULES.get(steps[-1], "schema")))
    problems += more if not wrong else [p for p in more if not _below(p.field, wrong)]
    if _has_error(problems):
        return None, problems
    line = doc.position(())[0]
    try:
        monitor = normalize.monitor(doc.data, name=path.stem, scope=scope, origin=path, line=line)
    except (ValueError, KeyError, TypeError) as e:  # schema and semantic checks should prevent it
        problems.append(P.error(file, line, 1, "", f"cannot normalize: {e}", "schema"))
        return None, problems
    return Entry(monitor, doc.position(("source",), key=True)), problems


def _below(field_name: str, fields: set[str]) -> bool:
    """True when ``field_name`` is one of ``fields`` or lies below one (``a.b`` below ``a``)."""
    return field_name in fields or any(field_name.startswith(f + ".") for f in fields)


def _has_error(problems: Iterable[Problem]) -> bool:
    return any(p.severity is Severity.ERROR for p in problems)
