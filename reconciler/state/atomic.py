"""Atomic file writes: a temp file in the same directory, then ``os.replace``.

A reader sees the old bytes or the new bytes, never a torn mix, even if the
writer is killed (SIGKILL) at any instant. With ``durable=True`` the file is
fsynced before the rename and the directory after it, so the new bytes and the
rename itself survive a power loss (POSIX rename durability needs the directory
fsync; see the fsync(2) man page, "fsync on the directory").
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


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


def write_bytes(path: Path, data: bytes, *, durable: bool, sole_writer: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically.

    Args:
        path: the target file; its directory must exist.
        data: the complete new content.
        durable: fsync the file before the rename and the directory after it.
        sole_writer: the caller is the only writer of ``path`` (the daemon's liveness
            flush): use the fixed temp name ``.<name>.tmp`` instead of a random one,
            which is cheaper; a temp left by a killed writer is simply overwritten.

    Raises:
        OSError: the write failed; ``path`` is then unchanged and the temp file removed.
            Its ``filename`` is always set (``path`` when the failing call had none).
    """
    if sole_writer:
        tmp = str(path.with_name(f".{path.name}.tmp"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    else:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; files here are ordinary readable files
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
