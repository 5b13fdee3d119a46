"""Why a detached daemon failed to start, carried to ``apply`` over a pipe.

``apply`` starts the daemon with its output going to ``<state>/daemon.log``. When
the state directory is on a full file system, the daemon's one-line error cannot
be written to that log either, and ``apply`` would have nothing to relay. So the
parent passes the write end of a pipe (its number in ``MONITORS_START_FD``, the
way ``systemd`` passes ``NOTIFY_SOCKET`` and D-Bus its ``--print-address`` fd):
the daemon writes its start error there (one line, UTF-8) or closes the pipe
once it is ready; the parent reads the line after the daemon exited.
"""

from __future__ import annotations

import contextlib
import os

ENV = "MONITORS_START_FD"
MAX_BYTES = 4096
"""At most this much of the daemon's message is read."""


class StartReport:
    """The daemon's end: ``failed(message)`` or ``ready()``, each at most once.

    Args:
        fd: the pipe's write end, or None (not started by ``apply``: both are no-ops).
    """

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    @classmethod
    def from_env(cls) -> StartReport:
        """The report named by ``MONITORS_START_FD`` (removed from the environment so
        no child process sees it); a missing, malformed or closed fd gives a no-op."""
        raw = os.environ.pop(ENV, "")
        if not raw.isdigit():
            return cls(None)
        fd = int(raw)
        try:
            os.fstat(fd)
        except OSError:
            return cls(None)
        os.set_inheritable(fd, False)
        return cls(fd)

    def failed(self, message: str) -> None:
        """Send the one-line start error ``message`` and close (write errors ignored)."""
        if self._fd is None:
            return
        line = message.replace("\n", " ").strip() + "\n"
        with contextlib.suppress(OSError):
            os.write(self._fd, line.encode("utf-8", "replace")[:MAX_BYTES])
        self.ready()

    def ready(self) -> None:
        """Close the pipe: the daemon started (the parent reads end-of-file)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def pipe() -> tuple[int, int]:
    """A pipe for one daemon start: ``(read end, write end)``; the read end does not
    block (the parent reads it only once the daemon has exited)."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    return read_end, write_end


def read(fd: int) -> str:
    """The message in the read end ``fd`` (empty when the daemon sent none); closes ``fd``."""
    chunks: list[bytes] = []
    try:
        while sum(len(c) for c in chunks) < MAX_BYTES:
            chunk = os.read(fd, MAX_BYTES)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EAGAIN: a child of the daemon still holds the write end; take what came
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").strip()
