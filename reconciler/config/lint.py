"""Lint: the loader's problems for a set of files, with the layers as context.

``run(settings)`` lints the configured layers. ``run(settings, paths)`` lints the
given files and directories (pre-commit passes changed files), loading the
layers as well so that cross-file checks (duplicate fingerprints, overlays
naming a monitor, shadowing) see the whole repository, then keeps only the
problems of the given files. ``--strict`` turns warnings into a failure.

Linting the layers also checks that they exist (``layer_problems``): a missing
user layer, or a layer directory that monitors.toml's ``[layers]`` names, is an
error (``missing-layer``), so a wrong path cannot lint clean with nothing in it.
An existing but empty layer is fine.

The fleet file is checked against its schema every time (``settings_check``), and
so is monitors.toml, by the caller's ``action_check`` (``actions.checks.bound``);
given as paths (pre-commit), they are not linted as monitor files.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from reconciler.config import files, loader, monitorfile, repochecks, settings_check
from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.settings import SETTINGS_FILE, USER_DIR, Settings

LAYER_KEYS = ("user", "system", "overlays")
"""The ``[layers]`` keys of monitors.toml, in ``layer_problems`` order."""


@dataclass
class LintReport:
    """Problems found and how many monitor files were linted.

    Attributes:
        problems: sorted by (file, line, col).
        monitors: number of monitor files linted (overlays not counted).
    """

    problems: list[Problem] = field(default_factory=list)
    monitors: int = 0

    @property
    def errors(self) -> int:
        """Number of errors."""
        return P.counts(self.problems)[0]

    @property
    def warnings(self) -> int:
        """Number of warnings."""
        return P.counts(self.problems)[1]

    def failed(self, *, strict: bool = False) -> bool:
        """True when there are errors, or (``strict``) warnings."""
        errors, warnings = P.counts(self.problems)
        return errors > 0 or (strict and warnings > 0)


def run(settings: Settings, paths: Sequence[Path] | None = None, *,
        now: datetime | None = None,
        action_check: monitorfile.ActionCheck | None = None,
        cache: Path | None = None) -> LintReport:
    """Lint the layers (``paths`` None) or the given files/directories in their context.

    Args:
        settings: the repository's settings (layers).
        paths: files or directories to lint; problems of other files are dropped.
        now: for expired pauses (default: now).
        action_check: extra checks of each action (see ``loader.load``).
        cache: the state directory whose per-file result cache to use (``loader.load``).

    Returns:
        a ``LintReport``. Never raises on bad input (a missing path is a problem).
    """
    with no_cyclic_gc():
        return _run(settings, paths, now=now, action_check=action_check, cache=cache)


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while linting (or planning: ``cli/plan``).
    Loading allocates many objects that stay alive (every monitor), so the collector's
    full passes, run ever more often as the heap grows, find nothing and cost about 15%
    at 4,000 files (``bench/lint_scale.py``); reference counting still frees everything
    else. For a short-lived command only: a daemon keeps its collector."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def layer_problems(settings: Settings) -> list[Problem]:
    """Errors (rule ``missing-layer``) for layer directories that should exist and do not.

    The user layer (``monitors.d/``, or ``[layers] user``) is always expected; the
    system and overlays layers only when ``[layers]`` in monitors.toml names them
    (``system/`` arrives with ``monitors system pull``, ``overlays/`` with the first
    pause or pin). A configured layer is reported against monitors.toml
    (``monitors.toml:1:1: error: layers.user: directory nope.d does not exist``),
    the default user layer against its own path. Reads only the file system.
    """
    configured = settings.toml.get("layers")
    layers = configured if isinstance(configured, dict) else {}
    dirs = {"user": settings.user_dir, "system": settings.system_dir,
            "overlays": settings.overlays_dir}
    out: list[Problem] = []
    for key in LAYER_KEYS:
        path = dirs[key]
        if path.is_dir() or (key != "user" and key not in layers):
            continue
        what = "is not a directory" if os.path.lexists(path) else "does not exist"
        if key in layers:
            toml = files.display(settings.root / SETTINGS_FILE)
            out.append(P.error(toml, 1, 1, f"layers.{key}",
                               f"directory {layers[key]} {what}", "missing-layer"))
        else:
            out.append(P.error(files.display(path), 1, 1, "",
                               f"the user layer directory {USER_DIR}/ {what} (create it, "
                               f"or set [layers] user in {SETTINGS_FILE})",
                               "missing-layer"))
    return out


def _run(settings: Settings, paths: Sequence[Path] | None, *, now: datetime | None,
         action_check: monitorfile.ActionCheck | None, cache: Path | None) -> LintReport:
    fleet = settings_check.fleet_problems(settings.fleet_file)
    if not paths:
        result = loader.load(settings, now=now, jobs=None, action_check=action_check,
                             cache=cache)
        extra = [*repochecks.ignored_entries(settings), *repochecks.system_modified(settings),
                 *repochecks.unknown_devices(settings, result.monitors,
                                             positions=result.positions),
                 *repochecks.owners_problems(settings, result.monitors,
                                             positions=result.positions),
                 *layer_problems(settings), *fleet]
        return LintReport(sorted([*result.problems, *extra]), result.files)
    # monitors.toml and the fleet file are checked whatever the paths (the caller adds
    # monitors.toml's problems, this adds the fleet's): never lint them as monitors
    own = {os.path.abspath(settings.root / SETTINGS_FILE), os.path.abspath(settings.fleet_file)}
    paths = [p for p in paths if os.path.abspath(p) not in own]
    if not paths:
        return LintReport(sorted(fleet), 0)
    missing = [p for p in paths if not os.path.lexists(p)]
    present = [p for p in paths if os.path.lexists(p)]
    wanted = {f for f, _ in files.collect(settings, present)}
    layer_files = [p for p in (settings.system_dir, settings.user_dir, settings.overlays_dir)
                   if p.is_dir()]
    result = loader.load(settings, paths=[*layer_files, *present], now=now, jobs=None,
                         action_check=action_check, cache=cache)
    cwd = Path.cwd()  # once: ``display`` would ask the OS for it per file
    shown = {files.display(f, cwd) for f in wanted}
    problems = [p for p in result.problems if p.file in shown]
    problems += [P.error(str(p), 1, 1, "", "no such file or directory", "unreadable")
                 for p in missing]
    count = sum(1 for f, kind in result.checked if f in wanted and kind != "overlay")
    return LintReport(sorted([*problems, *fleet]), count)
