"""``monitors run --demo``: an input for the shipped ``monitors.d/demo-file.yml`` (``make run``).

``tick`` rewrites ``<root>/.history/demo/tick.txt`` every ``INTERVAL`` seconds,
whatever the state directory, until cancelled. ``cli.run`` hands it to the daemon
as an extra task (``Daemon.also``); the daemon itself knows nothing of it. A write
error stops the demo (one log line), never the daemon.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from reconciler import atomic, settings, timestamps

log = logging.getLogger("monitors.daemon")

INTERVAL = 15.0
"""Seconds between two ticks."""
FILE = f"{settings.STATE_DIR}/demo/tick.txt"
"""Below the repository root, whatever the state directory: a demo *input* (git-ignored),
the path ``monitors.d/demo-file.yml`` watches."""


async def tick(root: Path, *, interval: float = INTERVAL) -> None:
    """Write ``demo tick N at <ISO time>`` to ``root / FILE`` every ``interval`` seconds."""
    path = root / FILE
    n = 0
    while True:
        n += 1
        text = f"demo tick {n} at {timestamps.utc_seconds()}\n"
        try:
            await asyncio.to_thread(_write, path, text)
        except OSError as e:
            log.error("demo: cannot write %s: %s (the demo stops; the daemon goes on)",
                      path, e.strerror or e)
            return
        log.info("demo: wrote %s (tick %d)", path, n)
        await asyncio.sleep(interval)


def _write(path: Path, text: str) -> None:
    atomic.make_dirs(path.parent)  # below the (private) state directory
    atomic.write_bytes(path, text.encode("utf-8"), durable=False)
