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

import asyncio
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.model import Monitor, Observation
from reconciler.sources import process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

MISSING = "missing"


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
    spec = monitor.source
    path = ctx.resolve(str(spec["path"]))
    timeout = float(spec["timeout"])
    try:
        async with asyncio.timeout(timeout):
            return await asyncio.to_thread(read, path, int(spec["maxBytes"]))
    except TimeoutError:
        raise errors.SourceError(f"{path}: not read within {timeout:g}s",
                                 kind="timeout") from None
