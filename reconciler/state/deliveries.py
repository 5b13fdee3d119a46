"""Webhook deliveries on disk: the spool and the replay window (``<state>/hooks/``).

* ``pending/<received>-<rand>.delivery``: a verified delivery not yet evaluated by
  every monitor it matched. One JSON header line (``Spooled`` minus the body), a
  newline, then the raw body bytes (a 25 MiB body is not re-escaped). Written
  atomically and fsynced (file and directory) *before* the receiver answers 2xx, so a
  crash right after the answer loses nothing: the daemon evaluates what is pending
  when it starts (``daemon.deliveries``). Removed once evaluated.
* ``seen.log``: the replay window, one line per delivery id (``<unix seconds>
  <provider>:<id>``), appended and fsynced after the spool file is in place. It
  keeps every id of the last ``WINDOW`` seconds and, beyond that, the last
  ``KEEP`` ids (GitHub redelivers on a timeout and on request: a second delivery of
  an id is answered 200 with no second event). Ids of pending files count as seen
  too, so a crash between the two writes cannot let a redelivery through. The log
  is rewritten (atomically) when it holds twice what the window keeps.

Thread-safe (one lock); the receiver calls it through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler import atomic

HOOKS_DIR = "hooks"
PENDING_DIR = "pending"
SEEN_FILE = "seen.log"
SUFFIX = ".delivery"
WINDOW = 24 * 3600.0
"""Seconds a delivery id is remembered at least."""
KEEP = 10_000
"""Delivery ids remembered at least, however old."""
MAX_IDS = 200_000
"""Hard cap on remembered ids (memory stays bounded under a flood)."""


@dataclass(frozen=True, slots=True)
class Spooled:
    """One verified delivery.

    Attributes:
        provider: ``github``, ``linear`` or ``generic``.
        event: the provider's event name (``pull_request``, ``Issue``).
        action: the payload's ``action``, or None.
        delivery: the provider's delivery id, or None (then no replay check).
        monitors: the names of the monitors it is for (matched when received).
        received_at: Unix seconds.
        body: the raw body.
        path: the spool file (set by ``spool`` and ``pending``).
    """

    provider: str
    event: str
    action: str | None
    delivery: str | None
    monitors: tuple[str, ...]
    received_at: float
    body: bytes
    path: Path | None = field(default=None, compare=False)

    @property
    def key(self) -> str | None:
        """The replay window's key (``provider:id``), None without an id."""
        return f"{self.provider}:{self.delivery}" if self.delivery else None

    def header(self) -> dict[str, Any]:
        """The JSON header line's mapping."""
        return {"provider": self.provider, "event": self.event, "action": self.action,
                "delivery": self.delivery, "monitors": list(self.monitors),
                "receivedAt": self.received_at}


class DeliveryLog:
    """The spool and the replay window under ``<state_dir>/hooks`` (module docstring).

    Args:
        state_dir: the state directory.
        clock: Unix seconds now (the replay window's ages).
    """

    def __init__(self, state_dir: Path, *, clock: Any = time.time) -> None:
        self.root = state_dir / HOOKS_DIR
        self.pending_dir = self.root / PENDING_DIR
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, float] | None = None
        self._lines = 0

    def _load(self) -> dict[str, float]:
        if self._seen is not None:
            return self._seen
        atomic.make_dirs(self.pending_dir)
        seen: dict[str, float] = {}
        lines = 0
        with contextlib.suppress(FileNotFoundError):
            for line in (self.root / SEEN_FILE).read_text("utf-8", "replace").splitlines():
                at, _, key = line.partition(" ")
                with contextlib.suppress(ValueError):
                    seen.pop(key, None)
                    seen[key] = float(at)
                    lines += 1
        for spooled in self._pending():
            if spooled.key:
                seen.setdefault(spooled.key, spooled.received_at)
        self._seen, self._lines = seen, lines
        self._trim(seen)
        return seen

    def _trim(self, seen: dict[str, float]) -> None:
        horizon = self.clock() - WINDOW
        extra = len(seen) - KEEP
        for key in list(seen):
            if extra <= 0 or (seen[key] >= horizon and len(seen) <= MAX_IDS):
                break
            del seen[key]
            extra -= 1

    def seen(self, provider: str, delivery: str | None) -> bool:
        """Whether ``provider``'s delivery ``delivery`` was received before (in the window)."""
        if not delivery:
            return False
        with self._lock:
            return f"{provider}:{delivery}" in self._load()

    def spool(self, delivery: Spooled) -> Spooled:
        """Write ``delivery`` durably to the spool, then remember its id.

        Returns:
            the delivery with its ``path``.

        Raises:
            OSError: it could not be written (nothing is remembered then).
        """
        with self._lock:
            seen = self._load()
            name = f"{delivery.received_at:017.6f}-{secrets.token_hex(4)}{SUFFIX}"
            path = self.pending_dir / name
            data = json.dumps(delivery.header()).encode() + b"\n" + delivery.body
            atomic.write_bytes(path, data, durable=True)
            if delivery.key:
                self._remember(seen, delivery.key, delivery.received_at)
            return Spooled(**{**_fields(delivery), "path": path})

    def _remember(self, seen: dict[str, float], key: str, at: float) -> None:
        seen.pop(key, None)
        seen[key] = at
        self._trim(seen)
        log = self.root / SEEN_FILE
        if self._lines > 2 * len(seen) + 1000:
            text = "".join(f"{t:.3f} {k}\n" for k, t in seen.items())
            atomic.write_bytes(log, text.encode(), durable=True)
            self._lines = len(seen)
            return
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, f"{at:.3f} {key}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._lines += 1

    def pending(self) -> list[Spooled]:
        """Every spooled delivery not yet evaluated, oldest first (an unreadable file is
        skipped and left in place)."""
        with self._lock:
            self._load()
            return self._pending()

    def _pending(self) -> list[Spooled]:
        out: list[Spooled] = []
        try:
            names = sorted(p for p in os.listdir(self.pending_dir) if p.endswith(SUFFIX))
        except FileNotFoundError:
            return out
        for name in names:
            path = self.pending_dir / name
            try:
                raw = path.read_bytes()
                head, _, body = raw.partition(b"\n")
                meta = json.loads(head)
                out.append(Spooled(provider=str(meta["provider"]), event=str(meta["event"]),
                                   action=meta.get("action"), delivery=meta.get("delivery"),
                                   monitors=tuple(meta.get("monitors") or ()),
                                   received_at=float(meta["receivedAt"]), body=body,
                                   path=path))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return out

    def done(self, delivery: Spooled) -> None:
        """Remove ``delivery``'s spool file (durably): it was evaluated."""
        if delivery.path is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(delivery.path)
        atomic.fsync_dir(delivery.path.parent)


def _fields(delivery: Spooled) -> Mapping[str, Any]:
    return {f: getattr(delivery, f) for f in Spooled.__dataclass_fields__}
