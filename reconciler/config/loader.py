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
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from reconciler.config import normalize, overlays, semantic, trust, validate, yamlload
from reconciler.config import problems as P
from reconciler.config.overlays import Overlay
from reconciler.config.problems import Problem
from reconciler.model import DeviceName, Monitor, MonitorName, Scope, Severity
from reconciler.settings import Settings

SUFFIXES = (".yml", ".yaml")

FileKind = Literal["system", "user", "overlay"]


@dataclass(frozen=True, slots=True)
class Shadow:
    """A user monitor shadowing a built-in of the same name.

    Attributes:
        same_behaviour: True when the user copy is redundant: same fingerprint and
            the same enabled, placement, rate limit, labels and allowDuplicate
            (description may differ). Deleting it then changes nothing but lets
            upstream fixes through. False when either file is invalid.
    """

    name: MonitorName
    user_file: Path
    system_file: Path
    same_behaviour: bool


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
    """

    monitors: dict[MonitorName, Monitor] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    invalid: dict[MonitorName, Path] = field(default_factory=dict)
    shadowed: dict[MonitorName, Shadow] = field(default_factory=dict)
    overlays: dict[MonitorName, Overlay] = field(default_factory=dict)
    files: int = 0
    digest: str = ""
    checked: list[tuple[Path, FileKind]] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Number of error-severity problems."""
        return P.counts(self.problems)[0]

    @property
    def warnings(self) -> int:
        """Number of warning-severity problems."""
        return P.counts(self.problems)[1]


@dataclass(slots=True)
class _Entry:
    monitor: Monitor
    source_pos: tuple[int, int]


def display(path: Path, cwd: Path | None = None) -> str:
    """How ``path`` is shown in problems: relative to ``cwd`` when below it, else as is;
    a byte that is not UTF-8 in the name is shown escaped (``\\xff``), so the text can
    always be printed."""
    text = str(path)
    prefix = os.path.join(str(cwd or Path.cwd()), "")
    text = text[len(prefix):] if text.startswith(prefix) else text
    return printable_name(text)


def printable_name(text: str) -> str:
    """``text`` (a path as Python decodes it, with ``surrogateescape``) with every byte
    that is not UTF-8 written as ``\\xNN``; the text itself when it is UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def bad_filename(path: Path) -> bool:
    """True when ``path``'s name holds a byte that is not UTF-8 (rule ``bad-filename``):
    such a name cannot be a monitor name, be shown or be written to state."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _yaml_files(directory: Path) -> list[Path]:
    """The ``*.yml``/``*.yaml`` entries directly in ``directory`` that the loader reads:
    regular files, and entries whose type cannot be told (a symlink loop, a permission
    error on the target), which ``yamlload.read`` then reports as that file's
    ``unreadable`` error instead of the whole layer vanishing. A directory, a dangling
    symlink or a device is skipped here (``repochecks.ignored_entries`` warns)."""
    names = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if not e.name.endswith(SUFFIXES) or e.name.startswith("."):
                    continue
                try:
                    if not e.is_file():
                        continue
                except OSError:
                    pass  # read() names the error
                names.append(e.name)
    except OSError:
        return []
    return [directory / n for n in sorted(names)]


def _within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def collect(settings: Settings,
            paths: Sequence[Path] | None = None) -> list[tuple[Path, FileKind]]:
    """The files to read, each with its kind.

    Default (``paths`` None): ``*.yml``/``*.yaml`` directly in the system layer,
    the user layer and the overlays directory. With ``paths``: those files, and
    the YAML files directly in those directories (plus the overlays directory
    when it lies directly below one), classified by where they are: in the
    overlays directory -> overlay, below the system layer -> system, else user.
    """
    system, user, ovl = (settings.system_dir.resolve(), settings.user_dir.resolve(),
                         settings.overlays_dir.resolve())

    def kind(path: Path) -> FileKind:
        if path.parent == ovl:
            return "overlay"
        if _within(path, system):
            return "system"
        return "user"

    out: dict[Path, FileKind] = {}
    if paths is None:
        layers: tuple[tuple[Path, FileKind], ...] = (
            (system, "system"), (user, "user"), (ovl, "overlay"))
        for directory, layer in layers:
            for f in _yaml_files(directory):
                out.setdefault(f, layer)
    else:
        for given in paths:
            p = Path(os.path.abspath(given))
            if p.is_dir():
                p = p.resolve()
                for f in _yaml_files(p):
                    out.setdefault(f, kind(f))
                if ovl.parent == p:
                    for f in _yaml_files(ovl):
                        out.setdefault(f, "overlay")
            else:
                resolved = p.parent.resolve() / p.name if p.parent.exists() else p
                out.setdefault(resolved, kind(resolved))
    return list(out.items())


PARALLEL_MIN = 2000
"""From this many monitor files, ``load(jobs=None)`` checks them in worker processes."""


ActionCheck = Callable[[Mapping[str, Any]], list[tuple[str, str]]]
"""An extra static check of a schema-valid ``action`` mapping: ``(field, message)`` pairs
with dotted fields such as ``action.agent`` (``lint`` passes the actions' checks)."""


def load(settings: Settings, *, paths: Sequence[Path] | None = None,
         now: datetime | None = None, jobs: int | None = 1,
         action_check: ActionCheck | None = None) -> LoadResult:
    """Load, validate and resolve the layers.

    Args:
        settings: where the layers are (``user_dir``, ``system_dir``, ``overlays_dir``).
        paths: read exactly these files/directories instead of the layers (see
            ``collect``); ``lint PATH...`` passes the layers plus the given paths.
        now: the time expired pauses are judged against (default: now, UTC).
        jobs: worker processes for the per-file checks: 1 (default) checks in this
            process; None picks one per CPU (at most 4) from ``PARALLEL_MIN`` files
            on, with forked workers. Only a single-threaded caller (the ``lint``
            command) may ask for more than 1: forking a threaded daemon is unsafe.
        action_check: run on each monitor that passed every other check; its
            pairs become errors (rules ``bad-template``, ``unknown-reference``,
            ``bad-command``, ``schema``). Must be picklable when ``jobs`` != 1.

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
    layers: dict[Scope, dict[MonitorName, _Entry]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    origins: dict[Scope, dict[MonitorName, Path]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    bad: dict[Scope, dict[MonitorName, Path]] = {Scope.SYSTEM: {}, Scope.USER: {}}
    overlay_files: list[tuple[Path, str, yamlload.Document | None, list[Problem]]] = []
    digest = hashlib.sha256()

    ranked = []
    for path, kind in collect(settings, paths):
        if bad_filename(path):  # one error for that file; never read, named or stored
            found.append(P.error(display(path, cwd), 1, 1, "",
                                 "the file name is not valid UTF-8: rename the file",
                                 "bad-filename"))
            continue
        ranked.append((_rel(path, root), path, kind))
    ranked.sort()
    result.checked = [(path, kind) for _, path, kind in ranked]
    items = [(path, kind, display(path, cwd)) for _, path, kind in ranked]
    outcomes = _map([item for item in items if item[1] != "overlay"], jobs, action_check)
    for (rel_text, _, _), (path, kind, file) in zip(ranked, items, strict=True):
        rel = rel_text.encode()
        digest.update(b"%d:%s\0" % (len(rel), rel))
        if kind == "overlay":
            raw: bytes | None = None
            doc = None
            problems: list[Problem] = []
            unsafe = trust.file_problem(path, "overlay", root=root)
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
        unsafe = trust.file_problem(path, "monitor file", root=root)
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
                                 f"monitor {name!r} is also defined by {display(first, cwd)}: "
                                 f"one file per monitor", "duplicate-name"))
            layers[scope].pop(name, None)
            bad[scope][name] = path
            continue
        origins[scope][name] = path
        if entry is None:
            bad[scope][name] = path
        else:
            layers[scope][name] = entry
    result.digest = "sha256:" + digest.hexdigest()

    entries = _resolve(result, layers, origins, bad, found, cwd)
    _apply_overlays(result, overlay_files, found, moment, cwd)
    final = [_Entry(result.monitors[name], entry.source_pos)
             for name, entry in entries.items() if name in result.monitors]
    found.extend(_duplicates(final, cwd))
    result.problems = sorted(found)
    return result


_Outcome = tuple[bytes, "_Entry | None", list[Problem]]


def _check(item: tuple[Path, FileKind, str], action_check: ActionCheck | None = None) -> _Outcome:
    """Read and check one monitor file: (sha256 of its bytes, entry or None, problems).
    Never raises: see ``problems.guard``."""
    path, kind, file = item
    scope = Scope.SYSTEM if kind == "system" else Scope.USER
    raw: bytes | None = None
    entry: _Entry | None = None
    problems: list[Problem] = []
    with P.guard(file, problems):
        raw, more = yamlload.read(path, file=file)
        problems += more
        if raw is not None:
            entry, more = _monitor(raw, path=path, file=file, scope=scope,
                                   action_check=action_check)
            problems += more
    return (hashlib.sha256(raw).digest() if raw is not None else b"-"), entry, problems


def _map(items: list[tuple[Path, FileKind, str]], jobs: int | None,
         action_check: ActionCheck | None) -> Iterator[_Outcome]:
    """``_check`` every item, in order; in forked worker processes when asked to."""
    check = functools.partial(_check, action_check=action_check)
    if jobs is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        jobs = min(cpus, 4) if len(items) >= PARALLEL_MIN else 1
    if jobs <= 1 or len(items) < 2:
        return map(check, items)
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # no fork on this platform
        return map(check, items)
    with context.Pool(jobs) as pool:
        outcomes = pool.map(check, items, chunksize=max(1, len(items) // (jobs * 8)))
    return iter(outcomes)


def _rel(path: Path, root: Path) -> str:
    text, prefix = path.as_posix(), root.as_posix().rstrip("/") + "/"
    return text[len(prefix):] if text.startswith(prefix) else text


_ACTION_RULES = {"prompt": "bad-template", "message": "bad-template", "agent": "unknown-reference",
                 "routine": "unknown-reference", "channel": "unknown-reference",
                 "command": "bad-command"}


def _monitor(raw: bytes, *, path: Path, file: str, scope: Scope,
             action_check: ActionCheck | None = None) -> tuple[_Entry | None, list[Problem]]:
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
    return _Entry(monitor, doc.position(("source",), key=True)), problems


def _below(field_name: str, fields: set[str]) -> bool:
    """True when ``field_name`` is one of ``fields`` or lies below one (``a.b`` below ``a``)."""
    return field_name in fields or any(field_name.startswith(f + ".") for f in fields)


def _has_error(problems: Iterable[Problem]) -> bool:
    return any(p.severity is Severity.ERROR for p in problems)


_COMPARED = ("fingerprint", "enabled", "device", "devices", "shared_input", "rate_limit",
             "labels", "allow_duplicate")


def _differences(user: Monitor, system: Monitor) -> list[str]:
    out = []
    for name in _COMPARED:
        if name == "fingerprint":
            for part in ("source", "condition", "action"):
                if getattr(user, part) != getattr(system, part):
                    out.append(part)
        elif getattr(user, name) != getattr(system, name):
            out.append(name)
    return out


def _resolve(result: LoadResult, layers: dict[Scope, dict[MonitorName, _Entry]],
             origins: dict[Scope, dict[MonitorName, Path]],
             bad: dict[Scope, dict[MonitorName, Path]], found: list[Problem],
             cwd: Path) -> dict[MonitorName, _Entry]:
    """Shadow system by user (by name); fill ``result.monitors``, ``invalid``, ``shadowed``."""
    entries: dict[MonitorName, _Entry] = {}
    for name, entry in layers[Scope.SYSTEM].items():
        entries[name] = entry
    for name, path in bad[Scope.SYSTEM].items():
        result.invalid[name] = path
    for name, user_path in origins[Scope.USER].items():
        system_path = origins[Scope.SYSTEM].get(name)
        user_entry = layers[Scope.USER].get(name)
        if system_path is not None:
            system_entry = layers[Scope.SYSTEM].get(name)
            same = False
            if user_entry is not None and system_entry is not None:
                diff = _differences(user_entry.monitor, system_entry.monitor)
                same = not diff
                shown = display(system_path, cwd)
                if same:
                    found.append(P.info(display(user_path, cwd), 1, 1, "",
                                        f"shadows built-in {shown} with the same behaviour: "
                                        f"delete this copy to follow upstream changes",
                                        "shadowed-redundant"))
                else:
                    found.append(P.info(display(user_path, cwd), 1, 1, "",
                                        f"shadows built-in {shown} and differs in "
                                        f"{', '.join(diff)}: it no longer receives upstream "
                                        f"changes", "shadowed-diverged"))
            result.shadowed[name] = Shadow(name, user_path, system_path, same)
            entries.pop(name, None)
            result.invalid.pop(name, None)
        if user_entry is None:
            result.invalid[name] = bad[Scope.USER].get(name, user_path)
        else:
            entries[name] = user_entry
    for name, entry in entries.items():
        result.monitors[name] = entry.monitor
    return entries


def _apply_overlays(result: LoadResult,
                    files: list[tuple[Path, str, yamlload.Document | None, list[Problem]]],
                    found: list[Problem], now: datetime, cwd: Path) -> None:
    """Validate each overlay and apply it to the monitor it names, one ``problems.guard`` per
    file: an overlay that raises makes its monitor invalid, never silently unpaused."""
    known = set(result.monitors) | set(result.invalid)
    by_monitor: dict[str, Path] = {}
    for path, file, doc, problems in files:
        with P.guard(file, found) as guard:
            _apply_overlay(result, path, file, doc, problems, found=found, known=known,
                           by_monitor=by_monitor, now=now, cwd=cwd)
        if guard.failed:
            name = MonitorName(path.stem)
            result.overlays.pop(name, None)
            if result.monitors.pop(name, None) is not None:
                result.invalid[name] = path


def _apply_overlay(result: LoadResult, path: Path, file: str, doc: yamlload.Document | None,
                   problems: list[Problem], *, found: list[Problem], known: set[MonitorName],
                   by_monitor: dict[str, Path], now: datetime, cwd: Path) -> None:
    overlay = None
    if doc is not None:
        overlay, problems = overlays.from_document(doc, path, problems)
    found.extend(problems)
    if overlay is None:
        name = MonitorName(path.stem)
        if name in result.monitors:  # a broken pause must not silently resume
            del result.monitors[name]
            result.invalid[name] = path
        return
    name = MonitorName(overlay.monitor)
    if name in by_monitor:
        found.append(P.error(file, overlay.line, overlay.col, "monitor",
                             f"a second overlay for {name!r} (first: "
                             f"{display(by_monitor[name], cwd)})", "duplicate-name"))
        return
    by_monitor[name] = path
    if name not in known:
        hint = validate.suggest(name, sorted(known))
        found.append(P.error(file, overlay.line, overlay.col, "monitor",
                             f"overlay for {name!r}, but no layer defines that monitor{hint}",
                             "overlay-orphan"))
        return
    result.overlays[name] = overlay
    monitor = result.monitors.get(name)
    if monitor is None:
        return
    pause = overlay.pause
    if pause is not None and overlays.is_expired(pause, now):
        found.append(P.warning(file, overlay.until_pos[0], overlay.until_pos[1],
                               "pause.until",
                               f"pause expired at {pause.until}: {name} runs again; remove "
                               f"the overlay (monitors resume {name})", "overlay-expired"))
        pause = None
    changes: dict[str, object] = {"overlay": path, "pause": pause}
    if overlay.pin:
        device = overlay.pin.get("device")
        changes["device"] = DeviceName(device) if device else None
        changes["devices"] = tuple(DeviceName(d) for d in overlay.pin.get("devices") or ())
    result.monitors[name] = dataclasses.replace(monitor, **changes)  # type: ignore[arg-type]


def _duplicates(entries: Iterable[_Entry], cwd: Path) -> list[Problem]:
    """Two resolved monitors with one fingerprint are one trigger fired twice: an error on
    each monitor that does not declare ``allowDuplicate``, naming the other file(s)."""
    groups: dict[str, list[_Entry]] = {}
    for entry in entries:
        groups.setdefault(entry.monitor.fingerprint, []).append(entry)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        for entry in group:
            m = entry.monitor
            if m.allow_duplicate:
                continue
            others = [o.monitor for o in group if o is not entry and not o.monitor.allow_duplicate]
            if not others:
                continue
            names = ", ".join(f"{o.name} ({display(o.origin, cwd)})" for o in others)
            out.append(P.error(display(m.origin, cwd), entry.source_pos[0], entry.source_pos[1],
                               "source",
                               f"same source, condition and action (fingerprint "
                               f"{m.fingerprint[:19]}) as {names}: one trigger fired twice; "
                               f"remove one, or set allowDuplicate: true if deliberate",
                               "duplicate-fingerprint"))
    return out
