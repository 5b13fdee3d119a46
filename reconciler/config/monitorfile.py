"""One monitor file's bytes -> its normalized monitor, or the problems that stop it.

``check`` reads, parses (``yamlload``), validates (``validate``, ``semantic`` and an
optional ``ActionCheck``) and normalizes (``normalize``) one file inside a
``problems.guard`` boundary; ``check_all`` runs it over many files, ``BATCH`` at a
time (``check_batch``: each step over the whole batch before the next step, with the
same results), in forked worker processes from ``PARALLEL_MIN`` files on when asked to.

Must not: look at other files (shadowing, overlays and duplicates are ``resolve``'s),
raise on bad input, or print.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
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

BATCH = 64
"""Files checked together by ``check_all``, one step at a time (``check_batch``). Running
one step (parse, validate, semantic checks, normalize) over 64 files before the next
keeps each step's code and data hot in the CPU's caches: about 20% less CPU per file
than checking each file from start to end (``bench/lint_scale.py``), with every file
still alone in its ``problems.guard`` boundary. Small enough to keep little memory
(64 parsed documents with their nodes)."""

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


Item = tuple[Path, FileKind, str]
"""A monitor file to check: its path, its kind and its name as displayed in problems."""


def check(item: Item, action_check: ActionCheck | None = None) -> Outcome:
    """Read and check one monitor file: (sha256 of its bytes, entry or None, problems).
    Never raises: see ``problems.guard``."""
    return check_files([item], action_check)[0]


def check_files(items: list[Item], action_check: ActionCheck | None = None) -> list[Outcome]:
    """``check`` each of ``items`` (read them, then ``check_batch`` those read), in order."""
    read_ones = [read(item) for item in items]
    pairs = [(item, raw) for item, (raw, _) in zip(items, read_ones, strict=True)
             if raw is not None]
    checked = iter(check_batch(pairs, action_check))
    out: list[Outcome] = []
    for raw, problems in read_ones:
        if raw is None:
            out.append((b"-", None, problems))
        else:
            entry, more = next(checked)
            out.append((hashlib.sha256(raw).digest(), entry, problems + more))
    return out


def read(item: Item) -> tuple[bytes | None, list[Problem]]:
    """The bytes of a monitor file, or None, with the problems reading found. Never
    raises (an exception is the file's ``internal-error``)."""
    path, _, file = item
    raw: bytes | None = None
    problems: list[Problem] = []
    with P.guard(file, problems):
        raw, more = yamlload.read(path, file=file)
        problems += more
    return raw, problems


def check_bytes(item: Item, raw: bytes,
                action_check: ActionCheck | None = None) -> tuple[Entry | None, list[Problem]]:
    """Check a monitor file's bytes ``raw`` (``check_batch`` of one file)."""
    return check_batch([(item, raw)], action_check)[0]


def check_all(items: list[Item], jobs: int | None, action_check: ActionCheck | None,
              cache: filecache.FileCache | None = None) -> Iterator[Outcome]:
    """``check`` every item, in order, ``BATCH`` files at a time; in forked worker
    processes when asked to (see ``workers``). With a ``cache``, a file whose bytes
    were checked before (same bytes, path, name, checks and code: ``filecache``) is
    read and hashed but not checked again, and the cache is saved at the end."""
    if cache is None:
        return _map(functools.partial(check_files, action_check=action_check), items, jobs)
    outcomes: list[Outcome | None] = []
    misses: list[tuple[int, Item, bytes, bytes, list[Problem]]] = []
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
    batch = functools.partial(check_batch, action_check=action_check)
    checked = _map(batch, [(item, raw) for _, item, raw, _, _ in misses], jobs)
    for (at, item, _, digest, problems), (entry, more) in zip(misses, checked, strict=True):
        cache.put(item, digest, (entry, more))
        outcomes[at] = (digest, entry, problems + more)
    cache.save()
    return (outcome for outcome in outcomes if outcome is not None)


def workers(count: int, jobs: int | None) -> int:
    """How many processes check ``count`` files: ``jobs`` when given; for None, one per
    CPU (at most 4) from ``PARALLEL_MIN`` files on, and only with ``MIN_CPUS`` CPUs or
    more (on 2 CPUs forked workers cost about half as much CPU again for little wall
    time: ``bench/lint_scale.py``), else 1."""
    if jobs is not None:
        return jobs
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return min(cpus, 4) if count >= PARALLEL_MIN and cpus >= MIN_CPUS else 1


def _map(fn: Callable[[list[T]], list[R]], items: list[T], jobs: int | None) -> Iterator[R]:
    """The results of ``fn`` over ``items`` split into batches of ``BATCH``, one by one
    and in order; the batches in forked worker processes when ``workers`` says so."""
    batches = [items[i:i + BATCH] for i in range(0, len(items), BATCH)]
    count = workers(len(items), jobs)
    if count <= 1 or len(items) < 2:
        return itertools.chain.from_iterable(map(fn, batches))
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return itertools.chain.from_iterable(map(fn, batches))
    with context.Pool(count) as pool:
        outcomes = pool.map(fn, batches, chunksize=max(1, len(batches) // (count * 8)))
    return itertools.chain.from_iterable(outcomes)


_ACTION_RULES = {"prompt": "bad-template", "message": "bad-template", "agent": "unknown-reference",
                 "routine": "unknown-reference", "channel": "unknown-reference",
                 "command": "bad-command"}


@dataclass(slots=True)
class _File:
    """One file's state between the steps of ``check_batch``: ``done`` once it has its
    answer (``entry`` None: invalid)."""

    path: Path
    file: str
    scope: Scope
    raw: bytes
    problems: list[Problem] = field(default_factory=list)
    doc: yamlload.Document | None = None
    wrong: set[str] = field(default_factory=set)
    entry: Entry | None = None
    done: bool = False


def check_batch(pairs: list[tuple[Item, bytes]], action_check: ActionCheck | None = None
                ) -> list[tuple[Entry | None, list[Problem]]]:
    """Parse, validate and normalize monitor files' bytes: for each ``(item, raw)``, its
    entry or None and its problems. A pure function of its arguments (what
    ``filecache`` stores, per file). Never raises.

    Each step runs over every file of the batch before the next one (``BATCH``), each
    file inside its own ``problems.guard``: an exception in one step is that file's
    one problem (``internal-error``, its other problems dropped) and ends its checks;
    the other files go on.

    The semantic checks (regexes, templates, durations, URLs, and ``action_check``'s
    references) run beside schema errors, on every field that is not itself wrong:
    their findings at or below a field that already has an error are dropped, so one
    run reports every independent problem and none twice.
    """
    files = [_File(path, file, Scope.SYSTEM if kind == "system" else Scope.USER, raw)
             for (path, kind, file), raw in pairs]
    for step in (_parse, _validate, functools.partial(_semantic, action_check=action_check),
                 _normalize):
        for f in files:
            if f.done:
                continue
            caught: list[Problem] = []
            with P.guard(f.file, caught) as boundary:
                step(f)
            if boundary.failed:
                f.problems, f.entry, f.done = caught, None, True
    return [(f.entry, f.problems) for f in files]


def _parse(f: _File) -> None:
    f.doc, f.problems = yamlload.parse(f.raw, file=f.file)
    f.done = f.doc is None


def _validate(f: _File) -> None:
    assert f.doc is not None
    broken = {p.field for p in f.problems}  # a duplicate key or tag already explains these
    f.problems += [p for p in validate.check(f.doc, kind="monitor") if p.field not in broken]
    f.wrong = {p.field for p in f.problems if p.field and p.severity is Severity.ERROR}


def _semantic(f: _File, action_check: ActionCheck | None) -> None:
    doc = f.doc
    assert doc is not None
    more = semantic.check(doc, stem=f.path.stem)
    action = doc.data.get("action")
    if action_check is not None and isinstance(action, dict):
        for field_name, message in action_check(action):
            steps = tuple(field_name.split("."))
            line, col = doc.position(steps)
            more.append(P.error(f.file, line, col, field_name, message,
                                _ACTION_RULES.get(steps[-1], "schema")))
    wrong = f.wrong
    f.problems += more if not wrong else [p for p in more if not _below(p.field, wrong)]
    f.done = _has_error(f.problems)


def _normalize(f: _File) -> None:
    doc = f.doc
    assert doc is not None
    f.done = True
    line = doc.position(())[0]
    try:
        monitor = normalize.monitor(doc.data, name=f.path.stem, scope=f.scope, origin=f.path,
                                    line=line)
    except (ValueError, KeyError, TypeError) as e:  # schema and semantic checks should prevent it
        f.problems.append(P.error(f.file, line, 1, "", f"cannot normalize: {e}", "schema"))
        return
    f.entry = Entry(monitor, doc.position(("source",), key=True), _placement(doc))


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
