"""The daemon: one per state directory; keeps the running evaluators equal to the repository.

Life cycle (``Daemon.run``):

1. take ``<state>/daemon.lock`` (a second daemon gets ``errors.LockedError``: exit 2
   naming the holder's pid);
2. read the last published running registry (``running.json``): its applied set is
   the *last known good* version of every monitor, used when a file is invalid now;
3. build the store, the dispatcher, the guards and the engine; remove what a crash
   left (temp files, fire directories without ``event.json``: ``state.leftovers``)
   and settle fires left unfinished by a crash (``actions.recovery``);
4. reconcile once (everything owned here starts), then, unless ``--once``, serve
   the control API, watch the layers (debounced) and reconcile on every change
   and every ``resync`` seconds, and when the earliest pause ``until`` among the
   loaded overlays passes (``PAUSE_MARGIN`` later; re-armed by every reconcile).
   In git mode (``[git] ref``, ``daemon.gitmode``) it watches the repository's refs
   instead of the layers, and fetches a remote ref every ``[git] fetch`` (jittered);
5. SIGHUP: re-read monitors.toml and the fleet file, then reconcile (``daemon.reload``;
   an invalid file keeps the settings in use and is logged);
   under systemd (``NOTIFY_SOCKET``) READY, RELOADING, STOPPING and WATCHDOG are
   sent (``daemon.sdnotify``);
   SIGTERM/SIGINT: stop the evaluators (in-flight state writes finish), drain the
   dispatcher briefly, flush liveness, publish the registry as not running,
   remove the socket, release the lock, exit 0. (``--once`` publishes the registry
   only here, once; if that fails, it exits 1 as a failed publish at a reconcile does.)
6. the lock file is checked every ``LOCK_CHECK`` seconds (and on every reconcile
   tick): when it was deleted or replaced (``rm -rf .history`` under a running
   daemon), a second daemon may now own the directory, so this one logs one line,
   stops its evaluators without writing to the directory again and exits 1.

Logs go to the ``monitors.*`` loggers, one line per event, naming the monitor.

This module is the life cycle only: start, lock, signals, the wait loop, stop. A
reconcile is ``daemon.reconcile``, the collaborators are built by ``daemon.parts``,
control requests are answered by ``daemon.operations``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from reconciler import errors, processes, redaction, settings, timestamps
from reconciler.daemon import operations, sdnotify, watch
from reconciler.daemon import parts as parts_mod
from reconciler.daemon import reconcile as reconcile_mod
from reconciler.daemon.options import Options, Service
from reconciler.model import MonitorName
from reconciler.state import direrrors
from reconciler.state import lock as lock_mod
from reconciler.state import registry as registry_mod

if TYPE_CHECKING:  # imported when serving (not for --once)
    from reconciler.daemon import control

log = logging.getLogger("monitors.daemon")

T = TypeVar("T")

SHUTDOWN_DRAIN = 3.0
LOCK_CHECK = 2.0
"""Seconds between checks that ``<state>/daemon.lock`` is still the inode this daemon locked."""


class Daemon:
    """The reconciler daemon for one settings/state directory (see the module docstring)."""

    def __init__(self, cfg: settings.Settings, options: Options | None = None) -> None:
        self.options = options or Options()
        self.lock = lock_mod.StateLock(cfg.state_dir)
        self.registry = registry_mod.Registry(device=cfg.device, pid=os.getpid())
        self.redactor = redaction.Redactor()  # shared by sources, engine, dispatcher, log
        self.reconciler = reconcile_mod.Reconciler(
            cfg, self.registry, redactor=self.redactor, boot_good={},
            allow_mass_stop=self.options.allow_mass_stop,
            on_started=None if self.options.once else self._started,
            publish=not self.options.once)  # --once publishes running.json at stop only
        self.operations = operations.Operations(self.reconciler)
        self.parts: parts_mod.Parts | None = None
        self.lost: str | None = None  # why the state lock no longer holds (then exit 1)
        self._unpublished: errors.StateError | None = None  # --once: publish at stop failed
        self.on_ready: Callable[[], None] | None = None  # called once serving (start report)
        self._stopping: asyncio.Event | None = None
        self._trigger: watch.Trigger | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._extra: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._services: list[Service] = []
        self._reload_requested = False  # SIGHUP: re-read monitors.toml before reconciling
        self.notifier = sdnotify.Notifier(None)  # systemd (Type=notify); set in _main

    @property
    def cfg(self) -> settings.Settings:
        """The settings in use (a SIGHUP may replace them)."""
        return self.reconciler.cfg

    def also(self, name: str, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Also run ``task()`` as the named task while serving (not with ``once``);
        cancelled at stop. ``monitors run --demo`` runs ``daemon.demo.tick`` so."""
        self._extra.append((name, task))

    def serve(self, service: Service) -> None:
        """Also serve ``service`` (not with ``once``): see ``Service``. ``monitors run``
        adds the HTTP server so (``server.app``); the daemon itself knows nothing of it."""
        self._services.append(service)

    # -- entry -------------------------------------------------------------------

    def run(self) -> int:
        """Take the lock and run until stopped (or one pass with ``once``); return the exit code.

        Raises:
            errors.LockedError: another daemon holds this state directory.
            errors.StateError: ``running.json`` is from a newer version, or the state
                directory cannot be written (read-only, not a directory, full).
            errors.ConfigError: ``monitors.toml`` (``actions.checks.require_valid``) or
                the fleet file is invalid.
        """
        from reconciler.actions import checks
        from reconciler.daemon import orphans

        checks.require_valid(self.cfg)  # one line naming the first problem, before the lock
        with direrrors.state_errors(self.cfg.state_dir):
            self.lock.acquire()
            try:
                previous, note = registry_mod.load_checked(self.cfg.state_dir)
                if note:
                    log.warning("%s", note)
                self.reconciler.boot_good = {n: e.monitor for n, e in previous.entries.items()}
                self.reconciler.follow(applied=(previous.git or {}).get("lastAppliedRevision"))
                self.registry.generation = previous.generation
                processes.use_pidfd_watcher()  # no thread per child (Python 3.11)
                with orphans.tracking(self.cfg.state_dir):  # kill a killed daemon's groups
                    return asyncio.run(self._main())
            finally:
                self.lock.release()

    async def _main(self) -> int:
        self._stopping = asyncio.Event()
        self.notifier = sdnotify.Notifier.from_env()
        redaction.filter_logs(self.redactor)
        self._trigger = watch.Trigger(debounce=self.options.debounce)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_stop, sig)
        loop.add_signal_handler(signal.SIGHUP, self._request_reload)
        self.registry.running = True
        self.registry.daemon_started_at = timestamps.utc_seconds()
        self.parts = self.reconciler.parts = parts_mod.build(
            self.cfg, self.registry, redactor=self.redactor, on_autopause=self._autopaused_now,
            spread_first_polls=not self.options.once)
        self.parts.engine.resume = not self.options.once  # --once polls every monitor now
        # --once: no own liveness.json per first check; the flush at stop writes them all
        self.parts.engine.first_check_files = not self.options.once
        server: control.ControlServer | None = None
        watcher: watch.Watcher | None = None
        started: list[Service] = []
        rc = 0
        try:
            await self.reconciler.recover()
            _, applied = await self.reconciler.reconcile(trigger="start", fetch=True)
            if self.options.once:
                rc = await self._once(applied.started)
            else:
                from reconciler.daemon import control, protocol

                server = control.ControlServer(
                    self.cfg.state_dir, self.operations.answer,
                    settings_digest=protocol.settings_digest(self.cfg))
                try:
                    await server.start()
                except OSError as e:
                    raise errors.StateError(
                        f"{self.cfg.state_dir}: cannot listen on the control socket: "
                        f"{e.strerror or e}") from e
                watcher = self._watcher()
                try:
                    watcher.start()
                except OSError as e:  # e.g. the inotify instance limit: resync still runs
                    log.warning("cannot watch the layers: %s (the periodic resync every %gs "
                                "still picks up changes)", e.strerror or e,
                                self.options.resync)
                for service in self._services:
                    await service.start()
                    started.append(service)
                for name, task in self._extra:
                    self._spawn(task(), name)
                git = self.reconciler.git
                watching = (f"following {git.revisions.ref} at "
                            f"{(git.revisions.applied or 'no commit yet')[:12]}"
                            if git is not None else f"watching {self.cfg.root}")
                log.info("daemon ready: pid %d, device %s, %d running, %s "
                         "(resync every %gs); Ctrl-C stops", os.getpid(), self.cfg.device,
                         len(self.registry.entries), watching, self.options.resync)
                if self.on_ready is not None:
                    self.on_ready()
                self.notifier.ready(f"{len(self.registry.entries)} monitors running")
                self._spawn(self.notifier.watchdog_loop(), "systemd-watchdog")
                await self._loop(watcher)
        finally:
            for service in reversed(started):
                with contextlib.suppress(Exception):
                    await service.close()
            if watcher is not None:
                watcher.stop()
            if server is not None and self.lost is None:
                # (with the lock lost the socket path may be another daemon's: leave it)
                await server.close()
            await self._shutdown()
        if self._unpublished is not None:  # --once: its one publish failed (exit 1)
            raise self._unpublished
        return int(errors.ExitCode.ERROR) if self.lost is not None else rc

    # -- signals -----------------------------------------------------------------

    def _request_stop(self, sig: signal.Signals) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            log.info("%s received: stopping", sig.name)
            self.notifier.stopping()
            self._stopping.set()
            if self._trigger is not None:
                self._trigger.poke("stop")

    def _request_reload(self) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            self._reload_requested = True
            if self._trigger is not None:
                self._trigger.poke("SIGHUP")

    def _watcher(self) -> watch.Watcher:
        """Local mode: the layers, monitors.toml and the fleet file. Git mode: the refs of
        the repository holding the root (a commit or a fetch moves the ref at once) and
        the local monitors.toml."""
        assert self._trigger is not None
        if self.reconciler.git is not None:
            return self.reconciler.git.watcher(self._trigger)
        return watch.Watcher(self._trigger, dirs=self._watched_dirs(), root=self.cfg.root,
                             names=(settings.SETTINGS_FILE, self.cfg.fleet_file.name))

    def _watched_dirs(self) -> list[Path]:
        dirs = [self.cfg.user_dir, self.cfg.system_dir]
        if not str(self.cfg.overlays_dir).startswith(str(self.cfg.user_dir) + os.sep):
            dirs.append(self.cfg.overlays_dir)
        return dirs

    def _autopaused_now(self, name: str) -> None:
        """The guard auto-paused ``name``: reconcile now so its evaluator stops at once
        (not at the next resync) and ``running.json`` agrees with ``plan``."""
        if self._trigger is not None:
            self._trigger.poke(f"auto-pause {name}")

    def _started(self, names: list[MonitorName]) -> None:
        self._spawn(self.operations.log_first_polls(names), "first-polls")

    # -- the wait loop -------------------------------------------------------------

    async def _loop(self, watcher: watch.Watcher) -> None:
        assert self._stopping is not None and self._trigger is not None
        rec = self.reconciler
        next_resync = time.monotonic() + self.options.resync
        next_fetch = self._next_fetch()
        while not self._stopping.is_set():
            due = next_resync if rec.pause_due is None else min(next_resync, rec.pause_due)
            due = due if next_fetch is None else min(due, next_fetch)
            left = max(0.0, due - time.monotonic())
            reasons = await self._trigger.wait(min(LOCK_CHECK, left))
            if self._stopping.is_set() or self._lock_lost():
                break
            now = time.monotonic()
            expired = rec.pause_due is not None and now >= rec.pause_due
            fetch = next_fetch is not None and now >= next_fetch
            if reasons is None and now < next_resync and not expired and not fetch:
                continue  # a lock check only
            watcher.ensure()
            if expired:
                rec.pause_due = None  # re-armed by the reconcile (not retried in a loop)
            if self._reload_requested:
                self._reload_requested = False
                self.notifier.reloading()
                from reconciler.daemon import reload

                await reload.apply(self)
                next_resync = now + self.options.resync  # [daemon] resync may have changed
                trigger = "SIGHUP"
            elif fetch:
                trigger = "fetch"
            elif reasons is None and now >= next_resync:
                next_resync = now + self.options.resync
                trigger = "resync"
            elif reasons is None:
                trigger = "pause expiry"
            elif all(r.startswith("auto-pause") for r in reasons):
                trigger = "auto-pause"
            else:  # the monitors that changed are logged, not raw file events (temp names)
                trigger = "file change"
            if fetch or trigger == "SIGHUP":
                next_fetch = self._next_fetch()
            try:
                await rec.reconcile(trigger=trigger, fetch=fetch)
            except errors.MonitorsError as e:
                log.error("reconcile failed: %s (will retry)", e)
            except Exception:
                log.exception("reconcile failed (a bug; will retry)")
            if trigger == "SIGHUP":
                self.notifier.ready(f"{len(self.registry.entries)} monitors running")

    def _next_fetch(self) -> float | None:
        """Monotonic time of the next fetch (git mode, a ref a fetch can move), jittered."""
        return None if self.reconciler.git is None else self.reconciler.git.next_fetch()

    def _lock_lost(self) -> bool:
        """True (once logged) when ``daemon.lock`` is gone or replaced; see step 6."""
        if self.lost is None:
            self.lost = self.lock.lost()
            if self.lost is not None:
                log.error("state directory lost under the running daemon: %s; stopping "
                          "every monitor and exiting (a daemon started since owns it)",
                          self.lost)
                if self.parts is not None:
                    self.parts.store.readonly = True  # never write into another daemon's store
        return self.lost is not None

    async def _once(self, started: list[MonitorName]) -> int:
        assert self.parts is not None
        deadline = time.monotonic() + self.options.once_wait
        results = await self._unless_stopped(
            self.operations.first_polls(started, self.options.once_wait))
        if results is None:
            return 0
        for name, result in sorted(results.items()):
            if result["status"] == "ok":
                log.info("polled %s", name)
            elif result["status"] == "failed":
                log.warning("poll failed: %s: %s", name, result["error"])
            else:
                log.warning("no poll of %s within %gs", name, self.options.once_wait)
        left = max(1.0, deadline - time.monotonic())
        if not await self._unless_stopped(self.parts.dispatcher.drain(left)):
            log.warning("dispatches still in flight after %gs: they stay recorded and are "
                        "recovered at the next start", left)
        return 0

    async def _unless_stopped(self, coro: Awaitable[T]) -> T | None:
        """Await ``coro`` unless SIGTERM/SIGINT comes first (then cancel it, return None)."""
        assert self._stopping is not None
        task = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return None

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- stop ----------------------------------------------------------------------

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        parts = self.parts
        if parts is not None and parts.engine.owners is not None:
            await parts.engine.owners.close()  # first: a standby takes over at once
        if parts is not None:
            try:
                await parts.engine.close()
            except Exception:
                log.exception("closing the engine failed")
            with contextlib.suppress(Exception):
                await parts.dispatcher.drain(SHUTDOWN_DRAIN)
            with contextlib.suppress(Exception):
                await parts.dispatcher.close()
            with contextlib.suppress(Exception):
                await parts.ctx.aclose()
            with contextlib.suppress(OSError):
                await asyncio.to_thread(parts.store.flush)
        self.registry.running = False
        if self.lost is not None:
            log.info("stopped (%d monitors were running); state directory lost, nothing "
                     "published", len(self.registry.entries))
            return
        try:
            await asyncio.to_thread(registry_mod.publish, self.cfg.state_dir, self.registry)
        except OSError as e:
            if self.options.once:  # its only publish: fail the run as a reconcile would
                self._unpublished = direrrors.state_error(self.cfg.state_dir, e,
                                                          doing=reconcile_mod.PUBLISHING)
            else:
                log.error("cannot publish running.json at exit: %s", direrrors.state_error(
                    self.cfg.state_dir, e))
        log.info("stopped (%d monitors were running)", len(self.registry.entries))
