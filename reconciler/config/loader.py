"""Files -> the resolved desired set: the one entry point of the config stage.

``load(settings)`` reads the system layer, the user layer and the overlays,
validates every file (``yamlload``, ``validate``, ``semantic``), resolves
shadowing (a user monitor shadows a built-in of the same name), applies
overlays (pause, pin), fills defaults and fingerprints (``normalize``), and
checks what needs more than one file: duplicate names, duplicate fingerprints
across both layers, overlays naming no monitor, expired pauses. Problems are
collected, never raised; no input produces an exception. No printing, no click.

One file can never take the others down: reading, checking and resolving each
file runs inside a boundary (``problems.guard``) that turns any exception, a bug by
definition, into that file's ``internal-error`` problem; the file then counts as
invalid (the daemon keeps its last applied version) and every other file is
loaded as usual, in lint, plan, the daemon and every view.

The jobs live in their own modules: ``files`` (which files, their shown names),
``monitorfile`` (one monitor file checked and normalized), ``resolve`` (shadowing,
overlays, duplicate fingerprints); this module orders them and builds the digest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from reconciler.config import files, monitorfile, resolve, trust, yamlload
from reconciler.config import problems as P
from reconciler.config.files import FileKind
from reconciler.config.monitorfile import ActionCheck, Entry
from reconciler.config.overlays import Overlay
from reconciler.config.problems import Problem
from reconciler.config.resolve import Shadow
from reconciler.model import Monitor, MonitorName, Scope
from reconciler.settings import Settings


@dataclass
class LoadResult:
    """What the layers resolve to.

    Attributes:
        monitors: every valid resolved monitor by name (shadowing and overlays
            applied; paused and disabled ones included).
        problems: every problem found, sorted by (file, line, col).
        invalid: names whose defining file (monitor, or its overlay) exists but is
            invalid, mapped to that file; name = file stem. The daemon keeps the
            last applied valid version of these running.
        shadowed: user monitors shadowing a built-in, by name.
        overlays: valid overlays by monitor name (applied or not).
        files: number of monitor files read (overlays not counted).
        digest: ``sha256:<hex>`` over the sorted root-relative paths and the sha256
            of the bytes of every file read (``plan --out`` uses it to notice that
            the world moved).
        checked: every file read, with its kind.
        positions: per valid monitor file, ``monitorfile.Entry.positions`` (where its
            placement nodes are).
    """

    monitors: dict[MonitorName, Monitor] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    invalid: dict[MonitorName, Path] = field(default_factory=dict)
    shadowed: dict[MonitorName, Shadow] = field(default_factory=dict)
    overlays: dict[MonitorName, Overlay] = field(default_factory=dict)
    files: int = 0
    digest: str = ""
    checked: list[tuple[Path, FileKind]] = field(default_factory=list)
    positions: dict[Path, Mapping[str, tuple[int, int]]] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        """Number of error-severity problems."""
        return P.counts(self.problems)[0]

    @property
    def warnings(self) -> int:
        """Number of warning-severity problems."""
        return P.counts(self.problems)[1]


def load(settings: Settings, *, paths: Sequence[Path] | None = None,
         now: datetime | None = None, jobs: int | None = 1,
         action_check: ActionCheck | None = None, cache: Path | None = None) -> LoadResult:
    """Load, validate and resolve the layers.

    Args:
        settings: where the layers are (``user_dir``, ``system_dir``, ``overlays_dir``).
        paths: read exactly these files/directories instead of the layers (see
            ``files.collect``); ``lint PATH...`` passes the layers plus the given paths.
        now: the time expired pauses are judged against (default: now, UTC).
        jobs: worker processes for the per-file checks: 1 (default) checks in this
            process; None picks one per CPU (at most 4) from ``monitorfile.PARALLEL_MIN`` files
            on, with forked workers. Only a single-threaded caller (the ``lint``
            command) may ask for more than 1: forking a threaded daemon is unsafe.
        action_check: run on each monitor that passed every other check; its
            pairs become errors (rules ``bad-template``, ``unknown-reference``,
            ``bad-command``, ``schema``). Must be picklable when ``jobs`` != 1.
        cache: a state directory whose cache of per-file results to use and update
            (``filecache``: an unchanged file is not checked again; the results are
            the same); None (default) checks every file.

    Returns:
        a ``LoadResult``; problems sorted. Never raises on bad input.
    """
    moment = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    root = settings.root.resolve()
    cwd = Path.cwd()
    result = LoadResult()
    found: list[Problem] = []
    layers: dict[Scope, dict[MonitorName, Entry]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    origins: dict[Scope, dict[MonitorName, Path]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    bad: dict[Scope, dict[MonitorName, Path]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    overlay_files: list[resolve.OverlayFile] = []
    digest = hashlib.sha256()

    ranked = []
    for path, kind in files.collect(settings, paths):
        if files.bad_filename(path):  # one error for that file; never read, named or stored
            found.append(P.error(files.display(path, cwd), 1, 1, "",
                                 "the file name is not valid UTF-8: rename the file",
                                 "bad-filename"))
            continue
        ranked.append((files.rel(path, root), path, kind))
    ranked.sort()
    result.checked = [(path, kind) for _, path, kind in ranked]
    items = [(path, kind, files.display(path, cwd)) for _, path, kind in ranked]
    monitor_items = [item for item in items if item[1] != "overlay"]
    store = None
    if cache is not None and monitor_items:
        from reconciler.config import filecache  # here: pickle only when there are files

        store = filecache.FileCache.open(cache, action_check)
    outcomes = monitorfile.check_all(monitor_items, jobs, action_check, store)
    dirs_seen: dict[str, str | None] = {}  # trust: each directory stat'ed once a load
    walks = trust.Walks()
    for (rel_text, _, _), (path, kind, file) in zip(ranked, items, strict=True):
        rel = rel_text.encode()
        digest.update(b"%d:%s\0" % (len(rel), rel))
        if kind == "overlay":
            raw: bytes | None = None
            doc = None
            problems: list[Problem] = []
            unsafe = trust.file_problem(path, "overlay", root=root, seen=dirs_seen,
                                         walks=walks)
            if unsafe:  # refused like a broken overlay: its monitor is invalid, not paused
                problems.append(P.error(file, 1, 1, "", unsafe, trust.RULE))
            with P.guard(file, problems):
                raw, more = yamlload.read(path, file=file)
                problems += more
                if raw is not None and not unsafe:
                    doc, more = yamlload.parse(raw, file=file)
                    problems += more
            digest.update(hashlib.sha256(raw).digest() if raw is not None else b"-")
            overlay_files.append((path, file, doc, problems))
            continue
        content, entry, problems = next(outcomes)
        unsafe = trust.file_problem(path, "monitor file", root=root, seen=dirs_seen,
                                    walks=walks)
        if unsafe:  # what a stranger could have written must not run, read or send
            problems, entry = [*problems, P.error(file, 1, 1, "", unsafe, trust.RULE)], None
        digest.update(content)
        result.files += 1
        scope = Scope.SYSTEM if kind == "system" else Scope.USER
        name = MonitorName(path.stem)
        found.extend(problems)
        if name in origins[scope]:
            first = origins[scope][name]
            found.append(P.error(file, 1, 1, "",
                                 f"monitor {name!r} is also defined by "
                                 f"{files.display(first, cwd)}: one file per monitor",
                                 "duplicate-name"))
            layers[scope].pop(name, None)
            bad[scope][name] = path
            continue
        origins[scope][name] = path
        if entry is None:
            bad[scope][name] = path
        else:
            layers[scope][name] = entry
            result.positions[path] = entry.positions
    result.digest = "sha256:" + digest.hexdigest()

    entries = resolve.shadow(result, layers, origins, bad, found, cwd)
    resolve.apply_overlays(result, overlay_files, found, moment, cwd)
    final = [Entry(result.monitors[name], entry.source_pos)
             for name, entry in entries.items() if name in result.monitors]
    found.extend(resolve.duplicates(final, cwd))
    result.problems = sorted(found)
    return result
