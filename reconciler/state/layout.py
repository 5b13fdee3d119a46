"""The state directory's layout and the base every part of the store shares.

``StoreBase`` holds what the parts of ``store.Store`` have in common: the root,
read-only mode, the lock, reported problems, write-error tracking, directory
creation and the checked read. The parts (``liveness.LivenessLog``,
``fires.FireLog``, ``store.Store``) add one job each on top of it. No records
are shaped here, and nothing here knows about monitors beyond their names.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from reconciler import atomic, errors
from reconciler.state import records, writeerrors

MONITORS_DIR = "monitors"
STATE_FILE = "state.json"
LIVENESS_FILE = "liveness.json"
LIVENESS_ALL_FILE = "liveness.json"
"""At the state directory's root: every monitor's heartbeat, rewritten by each flush."""
AUTOPAUSE_FILE = "autopause.json"
PID_MARKER_FILE = "pid-marker.json"
DROUGHT_FILE = "drought.json"
STOPPED_FILE = "stopped.json"
AUDIT_FILE = "audit.jsonl"
FIRES_DIR = "fires"
EVENT_FILE = "event.json"
README_FILE = "README"
NOTIFICATIONS_FILE = "notifications.log"

README_TEXT = """\
This directory is the per-machine running state of `monitors` (regenerable; never
commit it). One daemon at a time writes here (daemon.lock holds its pid).

  daemon.lock                            lock held by the running daemon
  running.json                           what the daemon runs and the applied revision
  liveness.json                          every monitor's heartbeat, rewritten every
                                         few seconds (the newer of it and the monitor's
                                         own liveness.json is the one that counts)
  monitors/<name>/state.json             condition state: fingerprint, baseline, last
                                         signature (written on baseline or fire only)
  monitors/<name>/liveness.json          heartbeat: lastCheckedAt, checkCount, lastError,
                                         consecutiveErrors, lastFiredAt, fireCount
                                         (written on the first check and when the
                                         error changes)
  monitors/<name>/autopause.json         a rate-limit auto-pause (`monitors resume` clears it)
  monitors/<name>/lifecycle.json         until/stopAfter/stopWhen: first start, fires, completion
  monitors/<name>/pid-marker.json        pid sources: the pid was seen running once
  monitors/<name>/stopped.json           why it was stopped (`monitor_stop`): reason, time, by
  audit.jsonl                            every MCP call and CLI write command, one JSON a line
  monitors/<name>/fires/<id>/event.json  one fire: the event, status, attempts

Every record has a format "version". A file named *.corrupt-<time> is a record that
could not be read; it was moved aside and kept for inspection. Delete it when done.
Deleting monitors/<name>/ makes that monitor start again from a fresh baseline.
"""


def check_name(name: str) -> str:
    """``name`` when it is usable as one path component (a monitor or fire id).

    Raises:
        errors.StateError: empty, with ``/`` or NUL, or starting with ``.``.
    """
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise errors.StateError(f"invalid monitor name for the state store: {name!r}")
    return name


def file_sig(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, mtime ns, size) of ``path``, or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


DIRS_KEPT = 65536
"""Monitor directories ``StoreBase.monitor_dir`` keeps made (then it starts afresh)."""


class StoreBase:
    """The state directory of one machine: layout, checked reads, directory creation.

    Args:
        state_dir: the state directory (created on the first write, never on a read).
        readonly: never write anything (``monitors test``, views): corrupt records are
            reported but not moved, and every write raises ``errors.StateError``.

    Attributes:
        root: ``state_dir``.
        problems: one line per future-version or corrupt record met so far (for
            ``list``, ``plan`` and the daemon log); a corrupt record has been moved aside.
    """

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        self.root = Path(state_dir)
        self.readonly = readonly
        self.problems: list[str] = []
        self._lock = threading.RLock()
        self._root_ready = False
        self._writes = writeerrors.WriteErrors()  # failing writes (disk full, read-only)
        self._dirs: dict[str, Path] = {}  # name -> monitor_dir(name)

    def monitor_dir(self, name: str) -> Path:
        """``<state>/monitors/<name>`` (not created). Made once per name (up to
        ``DIRS_KEPT`` names): building the path is most of the cost of a state read,
        called several times per monitor by every view and write."""
        found = self._dirs.get(name)
        if found is None:
            if len(self._dirs) >= DIRS_KEPT:
                self._dirs.clear()
            found = self._dirs[name] = self.root / MONITORS_DIR / check_name(name)
        return found

    def names(self) -> list[str]:
        """Names that have a directory under ``monitors/``, sorted."""
        try:
            return sorted(p.name for p in (self.root / MONITORS_DIR).iterdir() if p.is_dir())
        except FileNotFoundError:
            return []

    def write_errors(self) -> dict[str, dict[str, Any]]:
        """Monitors whose last write failed (``writeerrors.WriteErrors.snapshot``); a
        later successful write of that monitor clears it."""
        return self._writes.snapshot()

    def _ensure_root(self) -> None:
        if self.readonly:
            raise errors.StateError(f"{self.root}: the state store is open read-only")
        if self._root_ready:
            return
        base = self.root / MONITORS_DIR
        if not base.is_dir():
            atomic.make_dirs(base)
            atomic.fsync_dir(self.root)
        readme = self.root / README_FILE
        if not readme.exists():
            atomic.write_bytes(readme, README_TEXT.encode(), durable=False)
        self._root_ready = True

    def _ensure_dir(self, name: str, *, durable: bool) -> Path:
        self._ensure_root()
        path = self.monitor_dir(name)
        if not path.is_dir():
            # No ``parents``: a store whose directory was deleted under it (``rm -rf
            # .history``) fails its writes instead of bringing the directory back.
            path.mkdir(mode=atomic.DIR_MODE, exist_ok=True)
            if durable:
                atomic.fsync_dir(path.parent)
        return path

    def _report(self, problem: str) -> None:
        with self._lock:
            if problem not in self.problems:
                self.problems.append(problem)

    def _read(self, path: Path, supported: int) -> records.Loaded:
        try:
            loaded = records.read(path, supported=supported, move_corrupt=not self.readonly)
        except OSError as e:
            raise errors.StateError(f"{path}: cannot read: {e.strerror or e}") from e
        if loaded.problem:
            self._report(loaded.problem)
        return loaded

    def _remove_record(self, name: str, file: str) -> None:
        """Delete ``monitors/<name>/<file>`` durably (the directory fsynced); no-op when
        it does not exist."""
        path = self.monitor_dir(name) / file
        try:
            path.unlink()
            atomic.fsync_dir(path.parent)
        except FileNotFoundError:
            pass

    def _write_record(self, name: str, file: str, record: object) -> None:
        """Write ``monitors/<name>/<file>`` durably (file and directory fsynced),
        tracked for write errors.

        Raises:
            errors.StateError: the store is read-only.
            OSError: the write failed; the previous file is unchanged.
        """
        with self._writes.track(name):
            path = self._ensure_dir(name, durable=True) / file
            atomic.write_json(path, record, durable=True)
