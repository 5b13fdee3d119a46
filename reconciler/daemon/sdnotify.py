"""systemd's notify protocol: READY, STOPPING, RELOADING, STATUS and WATCHDOG datagrams.

``Type=notify`` services tell the service manager how they are doing by sending
newline-separated ``KEY=value`` assignments in one datagram to the unix socket
named by ``NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace).
With ``WatchdogSec=`` set, systemd passes ``WATCHDOG_USEC`` and restarts the
service when no ``WATCHDOG=1`` arrives within it; the daemon sends one every half
of it. Protocol: sd_notify(3), https://www.freedesktop.org/software/systemd/man/sd_notify.html
(the few lines of it, rather than a dependency). Without ``NOTIFY_SOCKET`` every
call is a no-op; a send error is ignored (never stops the daemon).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from typing import Any

ENV_SOCKET = "NOTIFY_SOCKET"
ENV_WATCHDOG = "WATCHDOG_USEC"
ENV_WATCHDOG_PID = "WATCHDOG_PID"


class Notifier:
    """Sends notifications to ``address`` (None: a no-op notifier).

    Args:
        address: the socket path, or ``"\\0name"`` for an abstract socket.
        watchdog: seconds of ``WATCHDOG_USEC``, or None (no watchdog).
    """

    def __init__(self, address: str | None, watchdog: float | None = None) -> None:
        self.address = address
        self.watchdog = watchdog

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Notifier:
        """The notifier ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` describe; taken out of
        ``environ`` (default ``os.environ``) so that no child process sees them."""
        env: Any = os.environ if environ is None else environ
        raw = env.pop(ENV_SOCKET, "")
        usec = env.pop(ENV_WATCHDOG, "")
        pid = env.pop(ENV_WATCHDOG_PID, "")
        address = ("\0" + raw[1:] if raw.startswith("@") else raw) or None
        watchdog = int(usec) / 1e6 if usec.isdigit() and int(usec) > 0 else None
        if pid.isdigit() and int(pid) != os.getpid():
            watchdog = None  # the watchdog is meant for another process
        return cls(address, watchdog)

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; True when sent."""
        if not self.address:
            return False
        with contextlib.suppress(OSError), \
                socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(self.address)
            s.sendall("\n".join(assignments).encode("utf-8", "replace"))
            return True
        return False

    def ready(self, status: str = "") -> None:
        """Start-up is complete (``READY=1``)."""
        self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> None:
        """A SIGHUP reload begins (``RELOADING=1``); ``ready`` ends it."""
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self.send("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> None:
        """The daemon is stopping (``STOPPING=1``)."""
        self.send("STOPPING=1")

    async def watchdog_loop(self) -> None:
        """``WATCHDOG=1`` every half ``watchdog`` seconds until cancelled (no-op without
        a watchdog). Runs on the event loop, so a stuck loop stops the pings."""
        if not self.address or not self.watchdog:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog / 2)
