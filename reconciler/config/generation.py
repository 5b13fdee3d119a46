"""A monitor's generation: what an agent reads before it changes a monitor.

The generation is a content hash of the bytes of the file that defines the monitor,
so it changes exactly when that file's content changes (an overlay, a pause or a
restart of the daemon leave it as it is) and needs no counter kept in state. It is
what ``monitor_update`` compares before it replaces a file (compare-and-replace, as
Kubernetes' ``resourceVersion`` or an HTTP ``If-Match`` ETag, RFC 9110 §13.1.1).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PREFIX = "g"
"""Generations read ``g-<16 hex digits>`` (64 bits of SHA-256)."""
DIGITS = 16


def of_bytes(data: bytes) -> str:
    """The generation of a file whose content is ``data``: ``g-<16 hex>``."""
    return f"{PREFIX}-{hashlib.sha256(data).hexdigest()[:DIGITS]}"


def of_file(path: Path | str) -> str | None:
    """The generation of the file at ``path``, or None when it cannot be read (gone,
    not a file): the monitor then has no file this device could change."""
    try:
        return of_bytes(Path(path).read_bytes())
    except OSError:
        return None
