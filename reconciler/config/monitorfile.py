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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler.config import normalize, semantic, validate, yamlload
from reconciler.config import problems as P
from reconciler.config.files import FileKind
from reconciler.config.problems import Problem
from reconciler.model import Monitor, Scope, Severity

if TYPE_CHECKING:
    from reconciler.config import filecache

PARALLEL_MIN = 2000
"""From this many monitor files, ``load(jobs=None)`` checks them in worker processes."""

MIN_CPUS = 4
"""Fewer CPUs than this: ``load(jobs=None)`` checks in this process (see ``workers``)."""

T = TypeVar("T")
R = TypeVar("R")


ActionCheck = Callable[[Mapping[str, Any]], list[tuple[str, str]]]
"""An extra static check of a schema-valid ``action`` mapping: ``(field, message)`` pairs
with dotted fields such as ``action.agent`` (``lint`` passes the actions' checks)."""


@dataclass(slots=True)
class Entry:
    """A valid monitor and the position of its ``source`` key (where a duplicate
    fingerprint is reported).

    Attributes:
        positions: ``(line, col)`` of the placement nodes by dotted path (``device``,
            ``devices.0``, ``source.device``), where lint reports a device the fleet
            does not list, without reading the file again.
    """

    monitor: Monitor
    source_pos: tuple[int, int]
    positions: Mapping[str, tuple[int, int]] = field(default_factory=dict)


Outcome = tuple[bytes, "Entry | None", list[Problem]]
"""What ``check`` gives for one file: the sha256 of its bytes (``b"-"`` when unread),
its entry or None, its problems."""


def check(item: tuple[Path, FileKind, str], action_check: ActionCheck | None = None) -> Outcome:
    """Read and check one monitor file: (sha256 of its bytes, entry or None, problems).
    Never raises: see ``problems.guard``."""
    raw, problems = read(item)
    if raw is None:
        return b"-", None, problems
    entry, more = check_bytes(item, raw, action_check)
    return hashlib.sha256(raw).digest(), entry, problems + more


def read(item: tuple[Path, FileKind, str]) -> tuple[bytes | None, list[Problem]]:
    """The bytes of a monitor file, or None, with the problems reading found. Never
    raises (an exception is the file's ``internal-error``)."""
    path, _, file = item
    raw: bytes | None = None
    problems: list[Problem] = []
    with P.guard(file, problems):
        raw, more = yamlload.read(path, file=file)
        problems += more
    return raw, problems


def check_bytes(item: tuple[Path, FileKind, str], raw: bytes,
                action_check: ActionCheck | None = None) -> tuple[Entry | None, list[Problem]]:
    """Check a monitor file's bytes ``raw`` (``parse_monitor``): its entry or None, and
    the problems. A pure function of its arguments (what ``filecache`` stores). Never
    raises (an exception is the file's ``internal-error``)."""
    path, kind, file = item
    entry: Entry | None = None
    problems: list[Problem] = []
    with P.guard(file, problems):
        entry, more = parse_monitor(raw, path=path, file=file,
                                    scope=Scope.SYSTEM if kind == "system" else Scope.USER,
                                    action_check=action_check)
        problems += more
    return entry, problems


def check_all(items: list[tuple[Path, FileKind, str]], jobs: int | None,
              action_check: ActionCheck | None,
              cache: filecache.FileCache | None = None) -> Iterator[Outcome]:
    """``check`` every item, in order; in forked worker processes when asked to (see
    ``workers``). With a ``cache``, a file whose bytes were checked before (same bytes,
    path, name, checks and code: ``filecache``) is read and hashed but not checked
    again, and the cache is saved at the end."""
    if cache is None:
        return _map(functools.partial(check, action_check=action_check), items, jobs)
    outcomes: list[Outcome | None] = []
    misses: list[tuple[int, tuple[Path, FileKind, str], bytes, bytes, list[Problem]]] = []
    for item in items:
        raw, problems = read(item)
        if raw is None:
            outcomes.append((b"-", None, problems))
            continue
        digest = hashlib.sha256(raw).digest()
        hit = cache.get(item, digest)
        if hit is None:
            misses.append((len(outcomes), item, raw, digest, problems))
            outcomes.append(None)
        else:
            entry, more = hit
            outcomes.append((digest, entry, problems + more))
    one = functools.partial(_check_pair, action_check=action_check)
    checked = _map(one, [(item, raw) for _, item, raw, _, _ in misses], jobs)
    for (at, item, _, digest, problems), (entry, more) in zip(misses, checked, strict=True):
        cache.put(item, digest, (entry, more))
        outcomes[at] = (digest, entry, problems + more)
    cache.save()
    return (outcome for outcome in outcomes if outcome is not None)


def _check_pair(pair: tuple[tuple[Path, FileKind, str], bytes],
                action_check: ActionCheck | None) -> tuple[Entry | None, list[Problem]]:
    return check_bytes(pair[0], pair[1], action_check)


def workers(count: int, jobs: int | None) -> int:
    """How many processes check ``count`` files: ``jobs`` when given; for None, one per
    CPU (at most 4) from ``PARALLEL_MIN`` files on, and only with ``MIN_CPUS`` CPUs or
    more (on 2 CPUs forked workers cost about half as much CPU again for little wall
    time: ``bench/lint_scale.py``), else 1."""
    if jobs is not None:
        return jobs
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return min(cpus, 4) if count >= PARALLEL_MIN and cpus >= MIN_CPUS else 1


def _map(fn: Callable[[T], R], items: list[T], jobs: int | None) -> Iterator[R]:
    """``map(fn, items)``, in forked worker processes when ``workers`` says so."""
    count = workers(len(items), jobs)
    if count <= 1 or len(items) < 2:
        return map(fn, items)
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return map(fn, items)
    with context.Pool(count) as pool:
        outcomes = pool.map(fn, items, chunksize=max(1, len(items) // (count * 8)))
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
    return Entry(monitor, doc.position(("source",), key=True), _placement(doc)), problems


def _placement(doc: yamlload.Document) -> dict[str, tuple[int, int]]:
    """``Entry.positions``: where ``device``, each ``devices`` item and ``source.device``
    are in ``doc``."""
    data = doc.data
    nodes: list[tuple[str | int, ...]] = [("device",)] if "device" in data else []
    devices = data.get("devices")
    nodes += [("devices", i) for i in range(len(devices) if isinstance(devices, list) else 0)]
    owners = data.get("owners")
    nodes += [("owners", i) for i in range(len(owners) if isinstance(owners, list) else 0)]
    source = data.get("source")
    if isinstance(source, dict) and "device" in source:
        nodes.append(("source", "device"))
    return {P.dotted(node): doc.position(node) for node in nodes}


def _below(field_name: str, fields: set[str]) -> bool:
    """True when ``field_name`` is one of ``fields`` or lies below one (``a.b`` below ``a``)."""
    return field_name in fields or any(field_name.startswith(f + ".") for f in fields)


def _has_error(problems: Iterable[Problem]) -> bool:
    return any(p.severity is Severity.ERROR for p in problems)
