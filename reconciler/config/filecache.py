"""A content-hash cache of each monitor file's check result, in the state directory.

Checking a file (parse, schema, semantic checks, normalization: ``monitorfile``)
costs about 150-250 µs; most files do not change between two runs of ``lint`` or
``plan``. This cache keeps, per file, the sha256 of the bytes last checked and what
checking them gave (the monitor or None, and the problems), so an unchanged file is
read and hashed but not checked again.

Never stale: an entry is used only when all of these equal what they were when it
was stored, else the file is checked as if there were no cache:

* the file's bytes (sha256), its path, its kind (layer) and its name as displayed;
* the cache format, the package version, the Python version, and a stamp of the
  package's own files (path, size, mtime of every ``.py`` and ``.json`` in
  ``reconciler/``: the schemas and every rule), so an upgrade or an edited checkout
  starts afresh;
* the action check (``monitorfile.ActionCheck``, bound to monitors.toml's agents,
  routines and channels), by the sha256 of its pickle (the same pickle worker
  processes receive); a check that cannot be pickled disables the cache.

Safe to delete (``<state>/cache/``): the next run checks every file and writes it
again. Best effort: a cache that cannot be read (missing, corrupt, another format,
not owned by this user or writable by others) is ignored, one that cannot be written
is not written; neither is ever an error. One file for the whole repository, replaced
atomically (``atomic.write_bytes``), holding the entries of the files of the last run
only. Stored with ``pickle`` (the results are the loader's own frozen values: a
monitor with its typed specs, and problems); read only from a file this user owns
that no one else can write, in a directory no one else can write, the same trust
as the running registry whose commands the daemon runs. A frozen slots dataclass is
stored as its class and field values (``_Pickler``): pickle's own way for those calls
``dataclasses.fields`` per object both ways, about a third of the cost of a 10,000-file
cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import operator
import os
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import reconciler
from reconciler import atomic

FORMAT = 2
"""Bumped when what an entry holds changes shape (2: dataclasses as ``_rebuild``)."""

DIR = "cache"
FILE_NAME = "monitor-files.pickle"

Item = tuple[Path, str, str]
"""A monitor file as ``monitorfile`` sees it: (path, kind, displayed name)."""

Key = tuple[str, str, str]
"""An ``Item`` as stored: the path as text (cheaper to store and load than a Path)."""


def path(state_dir: Path) -> Path:
    """Where the cache of the state directory ``state_dir`` lives."""
    return state_dir / DIR / FILE_NAME


def code_stamp(root: Path | None = None) -> bytes:
    """sha256 over (relative path, size, mtime ns) of the ``.py`` and ``.json`` files
    under ``root`` (default: this package): changes with any installed version or
    edited checkout."""
    root = Path(reconciler.__file__).parent if root is None else root
    h = hashlib.sha256()
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".py", ".json")):
                full = os.path.join(directory, name)
                st = os.stat(full)
                h.update(f"{os.path.relpath(full, root)}\0{st.st_size}\0{st.st_mtime_ns}\0"
                         .encode())
    return h.digest()


def key(action_check: object) -> bytes | None:
    """The key every entry of one run shares (see the module doc); None when the
    action check cannot be pickled (then nothing is cached)."""
    try:
        check = pickle.dumps(action_check, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a closure or lambda: not a stable identity
        return None
    h = hashlib.sha256()
    for part in (str(FORMAT), reconciler.__version__, sys.version):
        h.update(part.encode() + b"\0")
    h.update(code_stamp())
    h.update(hashlib.sha256(check).digest())
    return h.digest()


class FileCache:
    """The entries of one run: looked up with ``get``, added with ``put``, written by
    ``save`` (only the entries this run looked up or added, and only when something
    changed)."""

    def __init__(self, file: Path, run_key: bytes, entries: dict[Key, tuple[bytes, Any]]
                 ) -> None:
        self.file = file
        self.key = run_key
        self._old = entries
        self._new: dict[Key, tuple[bytes, Any]] = {}
        self._changed = False

    @classmethod
    def open(cls, state_dir: Path, action_check: object) -> FileCache | None:
        """The cache of ``state_dir`` for a run with ``action_check``, with its stored
        entries when the stored key matches (else empty); None when nothing can be
        cached (see ``key``)."""
        run_key = key(action_check)
        if run_key is None:
            return None
        file = path(state_dir)
        return cls(file, run_key, _read(file, run_key))

    def get(self, item: Item, digest: bytes) -> Any | None:
        """The stored result of ``item`` when its bytes still hash to ``digest``."""
        stored = (os.fspath(item[0]), item[1], item[2])
        found = self._old.get(stored)
        if found is None or found[0] != digest:
            return None
        self._new[stored] = found
        return found[1]

    def put(self, item: Item, digest: bytes, result: Any) -> None:
        """Store ``result``, what checking ``item``'s bytes (sha256 ``digest``) gave."""
        self._new[(os.fspath(item[0]), item[1], item[2])] = (digest, result)
        self._changed = True

    def save(self) -> None:
        """Write the entries of this run when they differ from the stored ones (an added,
        changed or dropped file). Never raises."""
        if not self._changed and len(self._new) == len(self._old):
            return
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(
            {"format": FORMAT, "key": self.key, "entries": self._new})
        data = buffer.getvalue()
        try:
            atomic.make_dirs(self.file.parent)
            atomic.write_bytes(self.file, data, durable=False)
        except OSError:
            pass  # read-only or full state directory: the cache is an optimisation


def _read(file: Path, run_key: bytes) -> dict[Key, tuple[bytes, Any]]:
    """The stored entries, or {} (absent, unreadable, untrusted, corrupt, other key)."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as f:
            # the file, its cache/ directory and the state directory holding it: one
            # that someone else can write could swap in a pickle of theirs
            if not (_private(os.fstat(f.fileno()))
                    and all(_private(os.stat(d)) for d in (file.parent, file.parent.parent))):
                return {}
            doc = pickle.load(f)
    except Exception:  # corrupt or written by another version: start afresh
        return {}
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != run_key:
        return {}
    entries = doc.get("entries")
    return entries if isinstance(entries, dict) else {}


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022



_Fields = tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]
_FIELDS: dict[type, _Fields | None] = {}


def _fields(cls: type) -> _Fields | None:
    """The field names of ``cls`` and a getter of their values, when ``cls`` is a slots
    dataclass pickled the dataclass way (its ``__getstate__`` is ``dataclasses``'); else
    None (pickled as usual). Cached per class."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    state = vars(cls).get("__getstate__")
    found: _Fields | None = None
    if dataclasses.is_dataclass(cls) and getattr(state, "__name__", "") == "_dataclass_getstate":
        names = tuple(f.name for f in dataclasses.fields(cls))
        getter = operator.attrgetter(*names)
        found = (names, getter if len(names) > 1 else lambda obj: (getter(obj),))
    _FIELDS[cls] = found
    return found


def _rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    """An instance of the slots dataclass ``cls`` with its fields set to ``values`` (in
    field order), as ``dataclasses``' own ``__setstate__`` sets them."""
    obj: Any = object.__new__(cls)
    found = _fields(cls)
    for name, value in zip(found[0] if found else (), values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


class _Pickler(pickle.Pickler):
    """``pickle.Pickler`` storing a slots dataclass as ``_rebuild(cls, values)``."""

    def reducer_override(self, obj: Any) -> Any:
        found = _fields(type(obj))
        if found is None:
            return NotImplemented
        return _rebuild, (type(obj), found[1](obj))
