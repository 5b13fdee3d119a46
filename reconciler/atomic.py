"""Atomic file writes and the JSON encodings written or hashed (a leaf: stdlib only).

Shared by ``config`` (the writer, ``gitrepo``, fingerprints), ``state`` (every
record) and the layers above, so neither of ``config`` and ``state`` imports the
other. It must not import anything from ``reconciler``.

Writes: a temp file in the same directory, then ``os.replace``. Every write gets its own
temp name (``_create_temp``), so concurrent writers of one file never share a temp.

A reader sees the old bytes or the new bytes, never a torn mix, even if the
writer is killed (SIGKILL) at any instant. With ``durable=True`` the file is
fsynced before the rename and the directory after it, so the new bytes and the
rename itself survive a power loss (POSIX rename durability needs the directory
fsync; see the fsync(2) man page, "fsync on the directory").

State is private: it holds prompts, observations and agent output, so files are
created ``FILE_MODE`` (0600) and directories ``DIR_MODE`` (0700). Modes go through
the process umask, so a stricter umask (0277) stays stricter.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

FILE_MODE = 0o600
"""Mode of every file the state directory gets (the umask may narrow it further)."""
DIR_MODE = 0o700
"""Mode of every directory created for state, the state directory's missing parents too."""


def make_dirs(path: Path) -> None:
    """Create the directory ``path`` and its missing parents, each ``DIR_MODE`` (narrowed
    by the umask), like ``mkdir -p -m 700`` (``Path.mkdir(parents=True)`` would create
    the parents with the default mode). Existing directories are left as they are.

    Raises:
        OSError: a directory cannot be created (``FileExistsError`` when ``path`` or a
            parent exists and is not a directory).
    """
    missing: list[Path] = []
    probe = path
    while not probe.is_dir() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise


def restrict_dir(path: Path) -> None:
    """Narrow an existing directory ``path`` owned by this user to owner-only access
    (drops the group and other bits; a state directory made 0755 by an older version
    becomes 0700). Another user's directory, or one that cannot be changed, is left
    alone: this is hardening, never a reason to fail."""
    with contextlib.suppress(OSError):
        st = os.stat(path)
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(path, st.st_mode & 0o7700)


def fsync_dir(path: Path) -> None:
    """fsync the directory ``path`` so renames and creations inside it are durable.

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes(path: Path, data: bytes, *, durable: bool, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data`` atomically.

    Args:
        path: the target file; its directory must exist.
        data: the complete new content.
        durable: fsync the file before the rename and the directory after it.
        mode: the new file's mode before the umask: ``FILE_MODE`` (0600) for state;
            files of the repository (monitor files, saved plans) pass 0o644.

    Raises:
        OSError: the write failed; ``path`` is then unchanged and the temp file removed.
            Its ``filename`` is always set (``path`` when the failing call had none).
    """
    fd, tmp = _create_temp(path, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:
            # write(2) and fsync(2) errors (ENOSPC, EIO) carry no file name: name the
            # target, so callers can say which file (and which directory) failed
            raise OSError(e.errno, e.strerror, str(path)) from e
        raise
    if durable:
        fsync_dir(path.parent)


def _create_temp(path: Path, mode: int) -> tuple[int, str]:
    """A new temp file beside ``path`` created with ``mode`` through the umask (what
    ``tempfile.mkstemp`` does, but with a chosen mode instead of a fixed 0600)."""
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: no free temporary file name for {path.name}")


def canonical(value: object) -> bytes:
    """Canonical JSON: sorted keys, compact separators, UTF-8 (non-ASCII kept as is).

    What fingerprints and digests hash (``config.fingerprint``, the running
    registry's config hash, a plan's digest): the bytes must never change, or every
    fingerprint would.

    Raises:
        TypeError, ValueError: ``value`` is not JSON-serializable.
    """
    return _CANONICAL.encode(value).encode()


# One encoder for ``canonical``: ``json.dumps`` with options builds one per call (a
# fingerprint per monitor file in lint).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def dumps(obj: Any) -> bytes:
    """The JSON encoding used for every record: sorted keys, two-space indent, UTF-8."""
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_json(path: Path, obj: Any, *, durable: bool) -> None:
    """Replace ``path`` with ``obj`` as JSON (``dumps``) atomically; see ``write_bytes``.

    Raises:
        OSError: the write failed (``path`` unchanged).
        TypeError, ValueError: ``obj`` is not JSON-serializable.
    """
    write_bytes(path, dumps(obj), durable=durable)
