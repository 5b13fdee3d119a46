"""``file``: a file's content (or a directory's sorted listing); mtime in meta.

* a regular file: its content, capped at ``maxBytes`` (``truncated``), decoded as
  UTF-8 with replacement; ``mtime`` (Unix seconds) and ``size`` go into meta, so
  touching a file without changing it is not a change;
* a directory: its entry names sorted, one per line, subdirectories with a
  trailing ``/``;
* a missing path: the observation ``missing`` (not an error: a file appearing or
  disappearing is what users watch for);
* unreadable (permissions, I/O error): a check error of kind ``unreadable``;
* a FIFO, socket or device: a check error of kind ``unreadable`` naming the file
  type (it is never opened for reading, so a FIFO cannot block a worker thread);
  the file is opened with ``O_NONBLOCK`` and checked again after opening;
* a path the OS cannot take (a NUL byte): a permanent check error of kind ``config``.

Reads run in a worker thread with the spec's ``timeout`` as a deadline.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.sources.fields import DEFAULT_MAX_BYTES, doc

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext

MISSING = "missing"
DEFAULT_INTERVAL = 10.0
TIMEOUT_CAP = 10.0
"""Seconds: the default ``timeout`` is the interval, at most this."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FileSpec:
    """A ``file`` source: a file's content or a directory's listing every ``interval``."""

    TYPE: ClassVar[str] = "file"
    KEYS: ClassVar[tuple[str, ...]] = ("type", "path", "interval", "timeout", "maxBytes")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    path: str = doc("The file or directory (~ expanded; relative to the repository root).",
                    "~/.config/app/settings.json")
    interval: float = doc("How often to read it (500ms..7d).", "30s",
                          default=DEFAULT_INTERVAL)
    timeout: float = doc("Deadline for one read; a check error. Default: the interval, "
                         "at most 10s.", "5s")
    max_bytes: int = doc("Content cap in bytes (default 1 MiB); past it meta.truncated is true.",
                         65536, default=DEFAULT_MAX_BYTES)

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``file: ~/notes.txt every 10s``."""
        return fields.describe(self.TYPE, self.path, self.interval)


Spec = FileSpec


def normalize(raw: Mapping[str, Any]) -> FileSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    interval = fields.dur(raw.get("interval"), DEFAULT_INTERVAL)
    return FileSpec(
        path=raw["path"],
        interval=interval,
        timeout=fields.dur(raw.get("timeout"), min(interval, TIMEOUT_CAP)),
        max_bytes=int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
    )


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """No checks beyond the shared ones (durations) for ``file``."""
    return []


ADD = AddFlag("--watch-file", "PATH", "A file's content (or a directory listing).",
                     interval=True)
"""``monitors add --watch-file PATH [--interval D]``."""


def from_flag(value: str, *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--watch-file PATH``."""
    return {"type": FileSpec.TYPE, "path": value, "interval": interval}

def _special(path: Path, mode: int) -> errors.SourceError:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    what = next((name for test, name in kinds if test(mode)), "not a regular file")
    return errors.SourceError(f"{path}: is {what}; only regular files and directories "
                              "are watched", kind="unreadable")


def read(path: Path, max_bytes: int) -> Observation:
    """Observe ``path`` synchronously (see the module docstring).

    Raises:
        errors.SourceError: kind ``unreadable``.
    """
    from reconciler.sources import process

    try:
        st = path.stat()
    except FileNotFoundError:
        return Observation(MISSING, {"exists": False})
    except NotADirectoryError:
        return Observation(MISSING, {"exists": False})
    except OSError as e:
        raise errors.SourceError(f"{path}: {e.strerror or e}", kind="unreadable") from e
    except ValueError as e:  # a NUL byte in the path
        raise errors.SourceError(f"{str(path)!r}: {e}", kind="config", permanent=True) from None
    if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
        raise _special(path, st.st_mode)
    meta: dict[str, Any] = {"exists": True, "mtime": st.st_mtime}
    try:
        if stat.S_ISDIR(st.st_mode):
            entries = []
            with os.scandir(path) as it:
                for entry in it:
                    entries.append(entry.name + ("/" if entry.is_dir() else ""))
            entries.sort()
            meta.update(kind="directory", entries=len(entries))
            return Observation("\n".join(entries), meta)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):  # replaced between stat and open
                raise _special(path, mode)
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        return Observation(MISSING, {"exists": False})
    except OSError as e:
        raise errors.SourceError(f"{path}: {e.strerror or e}", kind="unreadable") from e
    truncated = len(data) > max_bytes
    meta.update(kind="file", size=st.st_size, truncated=truncated)
    return Observation(process.decode(data[:max_bytes]), meta)


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """Observe ``source.path`` (``~`` expanded) once.

    Raises:
        errors.SourceError: kind ``unreadable`` or ``timeout``.
    """
    import asyncio

    spec = monitor.source
    assert isinstance(spec, FileSpec)
    path = ctx.resolve(spec.path)
    timeout = spec.timeout
    try:
        async with asyncio.timeout(timeout):
            return await asyncio.to_thread(read, path, spec.max_bytes)
    except TimeoutError:
        raise errors.SourceError(f"{path}: not read within {timeout:g}s",
                                 kind="timeout") from None
