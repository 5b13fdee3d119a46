"""Watch the layers and wake the reconcile loop: watchdog events, debounced, plus a resync.

* The directories are watched, not the files, so editors' rename-on-save
  (write ``.x.swp``/``x~``, rename over ``x.yml``) and ``git checkout``/``git pull``
  rewriting many files at once are just events in a watched directory.
* Events arrive on watchdog's thread and are handed to the event loop with
  ``call_soon_threadsafe``; ``Trigger.wait`` returns once no event came for
  ``debounce`` seconds (capped at ``max_delay`` after the first one), so a burst
  of a checkout gives one reconcile.
* A periodic resync (default 60 s) wakes the loop anyway: file events can be
  missed (overflowed inotify queue, a layer directory deleted and recreated,
  network file systems). A recreated layer directory is re-watched on the next
  wake-up (``Watcher.ensure``).

Uninteresting paths are ignored: ``.git/`` internals, editor swap and backup
files, anything that is not YAML, ``monitors.toml`` or the fleet file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger("monitors.daemon")

DEFAULT_DEBOUNCE = 0.05
DEFAULT_MAX_DELAY = 2.0
DEFAULT_RESYNC = 60.0

_YAML = (".yml", ".yaml")


def interesting(path: str, *, extra_names: Iterable[str] = ()) -> bool:
    """True when a changed ``path`` can change the desired set."""
    p = Path(path)
    if ".git" in p.parts:
        return False
    name = p.name
    if name.startswith(".#") or name.endswith(("~", ".swp", ".swx", ".tmp")):
        return False
    return name.endswith(_YAML) or name in set(extra_names) or "." not in name


class Trigger:
    """A debounced wake-up for the reconcile loop (lives on one event loop).

    ``poke`` may be called from any thread via ``poke_threadsafe``.
    """

    def __init__(self, *, debounce: float = DEFAULT_DEBOUNCE,
                 max_delay: float = DEFAULT_MAX_DELAY) -> None:
        self.debounce = debounce
        self.max_delay = max_delay
        self._event = asyncio.Event()
        self._first = 0.0
        self._last = 0.0
        self._loop = asyncio.get_running_loop()
        self.reasons: list[str] = []

    def poke(self, reason: str = "file event") -> None:
        """Note one change now (call on the loop's thread)."""
        now = time.monotonic()
        if not self._event.is_set():
            self._first = now
            self.reasons = []
        self._last = now
        if len(self.reasons) < 5:
            self.reasons.append(reason)
        self._event.set()

    def poke_threadsafe(self, reason: str = "file event") -> None:
        """``poke`` from another thread (watchdog's)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon is exiting
            self._loop.call_soon_threadsafe(self.poke, reason)

    async def wait(self, timeout: float) -> list[str] | None:
        """Wait up to ``timeout`` seconds for a poke, then for the burst to settle.

        Returns:
            the reasons of the burst, or None when the timeout passed without one.
        """
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            return None
        while True:
            now = time.monotonic()
            quiet_until = self._last + self.debounce
            hard_until = self._first + self.max_delay
            until = min(quiet_until, hard_until)
            if now >= until:
                break
            await asyncio.sleep(until - now)
        self._event.clear()
        return list(self.reasons)


class Watcher:
    """watchdog observers on the layer directories feeding a ``Trigger``.

    Args:
        trigger: what to poke.
        dirs: directories watched recursively (the layers; overlays live inside
            ``monitors.d/`` by default).
        root: watched non-recursively, for ``monitors.toml``, the fleet file and a
            layer directory that is created or deleted.
        names: extra file names below ``root`` that matter (``monitors.toml``, ...).
        accept: which changed paths poke the trigger, instead of ``interesting`` (git
            mode watches the refs of a git directory: every change but ``*.lock``).
    """

    def __init__(self, trigger: Trigger, *, dirs: Iterable[Path], root: Path,
                 names: Iterable[str] = (),
                 accept: Callable[[str], bool] | None = None) -> None:
        from watchdog.observers import Observer

        self.trigger = trigger
        self.dirs = [Path(d) for d in dirs]
        self.root = root
        self.names = tuple(names)
        self.accept = accept
        self._observer: Any = Observer()
        self._watches: dict[Path, tuple[Any, int]] = {}
        self.dir_names = frozenset(str(d) for d in self.dirs)
        self.stale: set[Path] = set()  # added from watchdog's thread; read in ensure()
        self.stale_lock = threading.Lock()
        self._handler = self._make_handler()

    def _make_handler(self) -> Any:
        from watchdog.events import FileSystemEventHandler

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                paths = [str(event.src_path)]
                if getattr(event, "dest_path", ""):
                    paths.append(str(event.dest_path))
                for p in paths:
                    if p in watcher.dir_names:
                        with watcher.stale_lock:  # a layer directory itself came or went
                            watcher.stale.add(Path(p))
                    if watcher.accept is not None:
                        if watcher.accept(p):
                            watcher.trigger.poke_threadsafe(f"{event.event_type} {p}")
                            return
                        continue
                    if (getattr(event, "is_directory", False) and ".git" not in Path(p).parts) \
                            or interesting(p, extra_names=watcher.names):
                        watcher.trigger.poke_threadsafe(f"{event.event_type} {p}")
                        return

        return Handler()

    def start(self) -> None:
        """Start the observer thread and watch what exists now."""
        self._observer.daemon = True
        self._observer.start()
        self.ensure()

    def ensure(self) -> None:
        """(Re)schedule watches for directories that exist and are not watched yet;
        drop watches of directories that vanished or were deleted and created again
        (seen as events in ``root``; the inode number may well be reused)."""
        wanted = [(self.root, False), *((d, True) for d in self.dirs)]
        with self.stale_lock:
            stale, self.stale = self.stale, set()
        for path, recursive in wanted:
            held = self._watches.get(path)
            try:
                inode: int | None = path.stat().st_ino if path.is_dir() else None
            except OSError:
                inode = None
            if held is not None and (held[1] != inode or path in stale):
                with contextlib.suppress(KeyError, ValueError):
                    self._observer.unschedule(held[0])
                del self._watches[path]
                held = None
            if held is None and inode is not None:
                try:
                    watch = self._observer.schedule(self._handler, str(path),
                                                    recursive=recursive)
                    self._watches[path] = (watch, inode)
                except OSError as e:
                    log.warning("cannot watch %s: %s (the periodic resync still covers it)",
                                path, e)

    def stop(self) -> None:
        """Stop the observer thread (bounded join)."""
        try:
            self._observer.stop()
            self._observer.join(timeout=5)
        except RuntimeError:
            pass
