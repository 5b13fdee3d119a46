"""Lint: the loader's problems for a set of files, with the layers as context.

``run(settings)`` lints the configured layers. ``run(settings, paths)`` lints the
given files and directories (pre-commit passes changed files), loading the
layers as well so that cross-file checks (duplicate fingerprints, overlays
naming a monitor, shadowing) see the whole repository, then keeps only the
problems of the given files. ``--strict`` turns warnings into a failure.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from reconciler.config import loader, repochecks
from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.settings import Settings


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
        action_check: loader.ActionCheck | None = None) -> LintReport:
    """Lint the layers (``paths`` None) or the given files/directories in their context.

    Args:
        settings: the repository's settings (layers).
        paths: files or directories to lint; problems of other files are dropped.
        now: for expired pauses (default: now).
        action_check: extra checks of each action (see ``loader.load``).

    Returns:
        a ``LintReport``. Never raises on bad input (a missing path is a problem).
    """
    with _no_cyclic_gc():
        return _run(settings, paths, now=now, action_check=action_check)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while linting. Loading allocates many
    objects that stay alive (every monitor), so the collector's full passes, run ever
    more often as the heap grows, find nothing and cost about 15% at 4,000 files
    (``bench/lint_scale.py``); reference counting still frees everything else."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run(settings: Settings, paths: Sequence[Path] | None, *, now: datetime | None,
         action_check: loader.ActionCheck | None) -> LintReport:
    if not paths:
        result = loader.load(settings, now=now, jobs=None, action_check=action_check)
        extra = [*repochecks.ignored_entries(settings), *repochecks.system_modified(settings),
                 *repochecks.unknown_devices(settings, result.monitors)]
        return LintReport(sorted([*result.problems, *extra]), result.files)
    missing = [p for p in paths if not os.path.lexists(p)]
    present = [p for p in paths if os.path.lexists(p)]
    wanted = {f for f, _ in loader.collect(settings, present)}
    layer_files = [p for p in (settings.system_dir, settings.user_dir, settings.overlays_dir)
                   if p.is_dir()]
    result = loader.load(settings, paths=[*layer_files, *present], now=now, jobs=None,
                         action_check=action_check)
    shown = {loader.display(f) for f in wanted}
    problems = [p for p in result.problems if p.file in shown]
    problems += [P.error(str(p), 1, 1, "", "no such file or directory", "unreadable")
                 for p in missing]
    count = sum(1 for f, kind in result.checked if f in wanted and kind != "overlay")
    return LintReport(sorted(problems), count)
