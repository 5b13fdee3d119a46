"""One daemon per state directory: an exclusive ``fcntl.flock`` on ``<state>/daemon.lock``.

The kernel drops the lock when the holder dies, so a crashed daemon never leaves
a stale lock behind. The file holds the holder's pid (for the error message only;
the lock, not the pid, is the truth). The file itself is never deleted: deleting
it would let two processes each lock a different inode.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from reconciler import atomic, errors

LOCK_FILE = "daemon.lock"


def describe(e: OSError) -> str:
    """The ``strerror`` of ``e``, with what to do for a full file system or quota
    (ENOSPC, EDQUOT): ``No space left on device (the file system is full: free some
    space)``."""
    text = e.strerror or str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        text += " (the file system is full: free some space)"
    return text


def holder_pid(state_dir: Path) -> int | None:
    """The pid written by the current (or last) holder, or None when unreadable."""
    try:
        text = (state_dir / LOCK_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def is_locked(state_dir: Path) -> bool:
    """True when some process holds the lock right now (probes without keeping it)."""
    path = state_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


class StateLock:
    """Context manager holding ``<state>/daemon.lock`` exclusively.

    Usage::

        with lock.StateLock(settings.state_dir):
            ...  # the only daemon on this state directory

    Raises (on enter):
        errors.LockedError: another process holds the lock (``pid`` = its pid when known).
        errors.StateError: the state directory cannot be created, or the file opened or
            written (a full file system: ``describe``).
    """

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (non-blocking); see the class docstring for errors."""
        try:
            atomic.make_dirs(self.state_dir)
            atomic.restrict_dir(self.state_dir)  # one made 0755 by an older version
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, atomic.FILE_MODE)
        except OSError as e:
            raise errors.StateError(f"{self.path}: cannot open lock file: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = holder_pid(self.state_dir)
            who = f"pid {pid}" if pid else "another process"
            raise errors.LockedError(
                f"{self.state_dir}: state directory is locked by {who} "
                "(a daemon is already running here)",
                pid=pid,
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as e:  # ENOSPC, EDQUOT, EIO: the pid is for messages, but a state
            os.close(fd)      # directory that cannot take 8 bytes cannot take a fire record
            raise errors.StateError(
                f"{self.path}: cannot write the lock file: {describe(e)}") from e
        self._fd = fd

    def lost(self) -> str | None:
        """Why the lock no longer guards this state directory, or None while it does.

        The lock is on an inode: when ``<state>/daemon.lock`` (or the whole state
        directory) is deleted or replaced under a running daemon, a second daemon can
        create a new file and lock it too. Cheap (two ``stat`` calls); call it on every
        reconcile tick. Returns one line naming the path when the file at ``path`` is
        missing or is not the inode this process locked; None when not holding.
        """
        if self._fd is None:
            return None
        try:
            held = os.fstat(self._fd)
        except OSError as e:
            return f"{self.path}: cannot stat the held lock: {e.strerror or e}"
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return f"{self.path}: lock file deleted (was the state directory removed?)"
        except OSError as e:
            return f"{self.path}: cannot stat the lock file: {e.strerror or e}"
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
            return f"{self.path}: lock file replaced by another one (another daemon may own it)"
        return None

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
