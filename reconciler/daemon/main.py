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
   loaded overlays passes (``PAUSE_MARGIN`` later; re-armed by every reconcile);
5. SIGHUP: re-read monitors.toml and the fleet file, then reconcile (``daemon.reload``;
   an invalid file keeps the settings in use and is logged);
   SIGTERM/SIGINT: stop the evaluators (in-flight state writes finish), drain the
   dispatcher briefly, flush liveness, publish the registry as not running,
   remove the socket, release the lock, exit 0.
6. the lock file is checked every ``LOCK_CHECK`` seconds (and on every reconcile
   tick): when it was deleted or replaced (``rm -rf .history`` under a running
   daemon), a second daemon may now own the directory, so this one logs one line,
   stops its evaluators without writing to the directory again and exits 1.

Logs go to the ``monitors.*`` loggers, one line per event, naming the monitor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import errors, redaction, settings
from reconciler.daemon import client, control, logformat, snapshot, supervisor, watch
from reconciler.model import Monitor, MonitorName
from reconciler.planning import plan as plan_mod
from reconciler.state import atomic
from reconciler.state import lock as lock_mod
from reconciler.state import registry as registry_mod

log = logging.getLogger("monitors.daemon")

DEFAULT_ONCE_WAIT = 30.0
FIRST_POLL_LOG_WAIT = 60.0
SHUTDOWN_DRAIN = 3.0
DEMO_INTERVAL = 15.0
LOCK_CHECK = 2.0
"""Seconds between checks that ``<state>/daemon.lock`` is still the inode this daemon locked."""
PAUSE_MARGIN = 0.5
"""Seconds after a pause's ``until`` at which the daemon reconciles to resume the monitor."""
DEMO_FILE = f"{settings.STATE_DIR}/demo/tick.txt"
"""Below the repository root, whatever the state directory: a demo *input* (git-ignored),
the path ``monitors.d/demo-file.yml`` watches."""


@dataclass(frozen=True, slots=True)
class Options:
    """How the daemon runs.

    Attributes:
        once: one reconcile, one poll of every owned monitor, drain, exit.
        once_wait: seconds ``--once`` waits for first polls and then for dispatches.
        resync: seconds between periodic resyncs (``[daemon] resync`` in monitors.toml).
        debounce: quiet seconds after a file event before reconciling.
        allow_mass_stop: never hold stops (``--allow-mass-stop``).
        demo: also rewrite ``<root>/.history/demo/tick.txt`` every 15 s (``make run``),
            whatever the state directory: it is the input of ``monitors.d/demo-file.yml``.
        resync_fixed: ``resync`` came from ``--resync``: a SIGHUP reload keeps it.
    """

    once: bool = False
    once_wait: float = DEFAULT_ONCE_WAIT
    resync: float = watch.DEFAULT_RESYNC
    debounce: float = watch.DEFAULT_DEBOUNCE
    allow_mass_stop: bool = False
    demo: bool = False
    resync_fixed: bool = False  # --resync given: a SIGHUP reload keeps it


def setup_logging(*, stream: Any = None, timestamps: bool = True, level: str = "info",
                  fmt: str = "text") -> None:
    """One line per event on stderr: ``HH:MM:SS level message`` (full date in a log
    file), or one JSON object a line (``fmt="json"``); see ``daemon.logformat.setup``."""
    logformat.setup(stream=stream, timestamps=timestamps, level=level, fmt=fmt)


@dataclass(slots=True)
class _Last:
    at: str = ""
    summary: str = ""
    trigger: str = ""
    problems: tuple[str, ...] = ()
    plan: plan_mod.Plan | None = None


class Daemon:
    """The reconciler daemon for one settings/state directory (see the module docstring)."""

    def __init__(self, cfg: settings.Settings, options: Options | None = None) -> None:
        self.cfg = cfg
        self.options = options or Options()
        self.lock = lock_mod.StateLock(cfg.state_dir)
        self.registry = registry_mod.Registry(device=cfg.device, pid=os.getpid())
        self.boot_good: dict[MonitorName, Monitor] = {}
        self.last = _Last()
        self._stopping: asyncio.Event | None = None
        self._trigger: watch.Trigger | None = None
        self._reconcile_lock: asyncio.Lock | None = None
        self._store: Any = None
        self._engine: Any = None
        self._dispatcher: Any = None
        self._guard: Any = None
        self._ctx: Any = None
        self._supervisor: supervisor.Supervisor | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.lost: str | None = None  # why the state lock no longer holds (then exit 1)
        self._pause_due: float | None = None  # monotonic time of the next pause expiry
        self._published: tuple[dict[str, Any], tuple[int, int, int] | None] | None = None
        self.redactor = redaction.Redactor()  # shared by sources, engine, dispatcher, log
        self.on_ready: Callable[[], None] | None = None  # called once serving (start report)
        self._reload_requested = False  # SIGHUP: re-read monitors.toml before reconciling

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
        with client.state_errors(self.cfg.state_dir):
            self.lock.acquire()
            try:
                previous, note = registry_mod.load_checked(self.cfg.state_dir)
                if note:
                    log.warning("%s", note)
                self.boot_good = {n: e.monitor for n, e in previous.entries.items()}
                self.registry.generation = previous.generation
                with orphans.tracking(self.cfg.state_dir):  # kill a killed daemon's groups
                    return asyncio.run(self._main())
            finally:
                self.lock.release()

    async def _main(self) -> int:
        self._stopping = asyncio.Event()
        self._reconcile_lock = asyncio.Lock()
        redaction.filter_logs(self.redactor)
        self._trigger = watch.Trigger(debounce=self.options.debounce)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._request_stop, sig)
        loop.add_signal_handler(signal.SIGHUP, self._request_reload)
        self.registry.running = True
        self.registry.daemon_started_at = snapshot.now_iso()
        await self._build()
        server: control.ControlServer | None = None
        watcher: watch.Watcher | None = None
        rc = 0
        try:
            await self._recover()
            _, applied = await self.reconcile(trigger="start")
            if self.options.once:
                rc = await self._once(applied.started)
            else:
                server = control.ControlServer(
                    self.cfg.state_dir, self.handle,
                    settings_digest=client.settings_digest(self.cfg))
                try:
                    await server.start()
                except OSError as e:
                    raise errors.StateError(
                        f"{self.cfg.state_dir}: cannot listen on the control socket: "
                        f"{e.strerror or e}") from e
                watcher = watch.Watcher(self._trigger, dirs=self._watched_dirs(),
                                        root=self.cfg.root,
                                        names=(settings.SETTINGS_FILE, self.cfg.fleet_file.name))
                try:
                    watcher.start()
                except OSError as e:  # e.g. the inotify instance limit: resync still runs
                    log.warning("cannot watch the layers: %s (the periodic resync every %gs "
                                "still picks up changes)", e.strerror or e,
                                self.options.resync)
                if self.options.demo:
                    self._spawn(self._demo_loop(), "demo")
                log.info("daemon ready: pid %d, device %s, %d running, watching %s "
                         "(resync every %gs); Ctrl-C stops", os.getpid(), self.cfg.device,
                         len(self.registry.entries), self.cfg.root, self.options.resync)
                if self.on_ready is not None:
                    self.on_ready()
                await self._loop(watcher)
        finally:
            if watcher is not None:
                watcher.stop()
            if server is not None and self.lost is None:
                # (with the lock lost the socket path may be another daemon's: leave it)
                await server.close()
            await self._shutdown()
        return int(errors.ExitCode.ERROR) if self.lost is not None else rc

    def _request_stop(self, sig: signal.Signals) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            log.info("%s received: stopping", sig.name)
            self._stopping.set()
            if self._trigger is not None:
                self._trigger.poke("stop")

    def _request_reload(self) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            self._reload_requested = True
            if self._trigger is not None:
                self._trigger.poke("SIGHUP")

    async def _reload(self) -> None:
        """Re-read monitors.toml and the fleet file (SIGHUP) and use them; an invalid
        file keeps the settings in use. One log line either way (``daemon.reload``)."""
        from reconciler.daemon import reload

        try:
            new = await asyncio.to_thread(reload.read, self.cfg)
        except errors.MonitorsError as e:
            log.error("%s", reload.describe_error(e))
            return
        before = client.settings_digest(self.cfg)
        self.cfg = new.cfg
        if self._dispatcher is not None:
            self._dispatcher.reconfigure(new.actions)
        if self._ctx is not None:
            self._ctx.settings, self._ctx.fleet = new.cfg, new.fleet
        if not self.options.resync_fixed:
            self.options = dataclasses.replace(self.options, resync=new.resync)
        after = client.settings_digest(new.cfg)
        what = "unchanged" if after == before else f"changed ({after[:19]}...)"
        kept = f"; needs a restart, not applied: {'; '.join(new.kept)}" if new.kept else ""
        log.info("SIGHUP: re-read %s: %s; reconciling%s", settings.SETTINGS_FILE, what, kept)

    def _watched_dirs(self) -> list[Path]:
        dirs = [self.cfg.user_dir, self.cfg.system_dir]
        if not str(self.cfg.overlays_dir).startswith(str(self.cfg.user_dir) + os.sep):
            dirs.append(self.cfg.overlays_dir)
        return dirs

    # -- parts -------------------------------------------------------------------

    async def _build(self) -> None:
        from reconciler import fleet, sources
        from reconciler.actions import dispatch, guards
        from reconciler.config import trust
        from reconciler.daemon import evaluator
        from reconciler.state import store as store_mod

        toml_path = self.cfg.root / settings.SETTINGS_FILE
        unsafe = trust.settings_problem(self.cfg.toml, toml_path, root=self.cfg.root)
        if unsafe:  # its agents and routines would run what another user wrote
            raise errors.ConfigError(f"{toml_path}: {unsafe}")
        self._store = store_mod.Store(self.cfg.state_dir)
        self._dispatcher = dispatch.build(self._store, self.cfg.toml, state_dir=self.cfg.state_dir,
                                          root=self.cfg.root,
                                          redactor=self.redactor)
        self._guard = guards.build(self._store, self._dispatcher)
        self._guard.on_autopause = self._autopaused_now
        self._ctx = sources.SourceContext.create(store=self._store,
                                                 fleet=fleet.load(self.cfg.fleet_file),
                                                 settings=self.cfg, redactor=self.redactor)
        self._engine = evaluator.Engine(self._store, self._dispatcher, ctx=self._ctx,
                                        guard=self._guard)
        self._supervisor = supervisor.Supervisor(self._engine, self._store, self.registry,
                                                 now=snapshot.now_iso)

    def _autopaused_now(self, name: str) -> None:
        """The guard auto-paused ``name``: reconcile now so its evaluator stops at once
        (not at the next resync) and ``running.json`` agrees with ``plan``."""
        if self._trigger is not None:
            self._trigger.poke(f"auto-pause {name}")

    async def _recover(self) -> None:
        from reconciler.actions import recovery
        from reconciler.state import leftovers

        swept = await asyncio.to_thread(leftovers.sweep, self.cfg.state_dir)
        if swept.summary():
            log.info("%s", swept.summary())
        for line in swept.kept:
            log.warning("%s", line)
        snap = await asyncio.to_thread(self._read_snapshot, self.boot_good, with_git=False)
        self._register_secrets(snap)
        monitors: dict[str, Monitor] = {str(n): m for n, m in snap.desired.monitors.items()}
        done = await recovery.recover(self._store, monitors, self._dispatcher)
        for item in done:
            log.info("recovered %s fire %s (%s): %s", item.monitor, item.event_id,
                     item.outcome, item.reason)

    def _read_snapshot(self, last_good: Mapping[MonitorName, Monitor], *,
                       with_git: bool = True) -> snapshot.Snapshot:
        """``snapshot.read`` with the auto-pauses of the state directory (a worker thread:
        both list and read files)."""
        return snapshot.read(self.cfg, last_good=last_good, autopaused=self._autopaused(),
                             with_git=with_git)

    def _register_secrets(self, snap: snapshot.Snapshot) -> None:
        """Register every secret the snapshot's monitors and monitors.toml reference
        (``redaction.collect``) before anything of theirs runs."""
        monitors = [*snap.monitors.values(), *snap.desired.monitors.values()]
        self.redactor.add_all(redaction.collect(monitors, self.cfg.toml, os.environ))

    def _autopaused(self) -> dict[MonitorName, str]:
        out: dict[MonitorName, str] = {}
        if self._store is None:
            return out
        for name in self._store.names():
            record = self._store.autopause(name)
            if record:
                out[MonitorName(name)] = (f"{record.get('reason', 'rate limit')} (since "
                                          f"{record.get('at', '?')}; `monitors resume` clears it)")
        return out

    def _last_good(self) -> dict[MonitorName, Monitor]:
        good = dict(self.boot_good)
        good.update(supervisor.running_monitors(self.registry))
        return good

    # -- reconcile ---------------------------------------------------------------

    async def reconcile(self, *, trigger: str = "", allow_mass_stop: bool = False
                        ) -> tuple[plan_mod.Plan, supervisor.Applied]:
        """Load the layers, plan against the registry, apply, publish ``running.json``.

        Reconciles never overlap (a lock). File and config problems are logged when
        they change; held stops are logged at every pass until resolved.
        """
        assert self._reconcile_lock is not None and self._supervisor is not None
        async with self._reconcile_lock:
            snap = await asyncio.to_thread(self._read_snapshot, self._last_good())
            self._register_secrets(snap)
            expiry = snap.next_pause_expiry
            self._pause_due = None if expiry is None else (
                time.monotonic() + max(0.0, expiry - time.time()) + PAUSE_MARGIN)
            plan = plan_mod.make(
                snap.desired, supervisor.running_monitors(self.registry), device=self.cfg.device,
                daemon_running=True, daemon_pid=os.getpid(), generation=self.registry.generation,
                digest=snap.digest, commit=snap.commit, dirty=snap.dirty, problems=snap.problems,
                allow_mass_stop=allow_mass_stop or self.options.allow_mass_stop,
                created_at=snapshot.now_iso(), root=self.cfg.root,
                error_files=snap.error_files)
            errors_now = snap.errors
            if errors_now != self.last.problems:
                for line in errors_now:
                    log.error("%s", line)
                if self.last.problems and not errors_now:
                    log.info("all monitor files are valid again")
                for change in plan.changes:
                    if change.action.value == "keep":
                        log.warning("keep %s: file is invalid, its last applied version "
                                    "keeps running", change.name)
                self.last.problems = errors_now
            elif errors_now and trigger == "resync":
                for line in errors_now:
                    log.warning("still invalid: %s", line)
            if plan.mass_stop:
                log.warning("HELD %d stops (mass-stop guard): %s",
                            sum(1 for c in plan.changes if c.held), plan.mass_stop)
            applied = await self._supervisor.apply(plan)
            self.registry.held = [{"name": c.name, "action": c.action.value,
                                   "reason": plan.mass_stop or ""} for c in applied.held]
            self.registry.digest = snap.digest
            self.registry.commit, self.registry.dirty = snap.commit, snap.dirty
            self.registry.applied_at = snapshot.now_iso()
            try:
                await asyncio.to_thread(self._publish_if_changed)
            except OSError as e:
                raise client.state_error(self.cfg.state_dir, e,
                                         doing="publish the running registry") from e
            self.last.at = self.registry.applied_at
            self.last.summary = plan.summary()
            self.last.trigger = trigger
            self.last.plan = plan
            if applied.changed or applied.failed:
                commit = f" at {snap.commit[:12]}" if snap.commit else ""
                log.info("reconciled (%s)%s: %s; generation %d", trigger or "request", commit,
                         applied_names(plan, applied), self.registry.generation)
            if applied.started and not self.options.once:
                self._spawn(self._log_first_polls(list(applied.started)), "first-polls")
            return plan, applied

    def _publish_if_changed(self) -> bool:
        """Publish ``running.json`` unless its content (all but ``appliedAt``) equals what
        this daemon last published and the file is still that one (same inode, mtime,
        size). Returns whether it published.

        Raises:
            OSError: the state directory is not writable.
        """
        doc = self.registry.to_json()
        doc.pop("appliedAt", None)
        file = registry_mod.path(self.cfg.state_dir)
        if self._published is not None and self._published == (doc, _stat_key(file)):
            return False
        self._published = None
        registry_mod.publish(self.cfg.state_dir, self.registry)
        key = _stat_key(file)  # (None: deleted already; then publish again next time)
        self._published = (doc, key) if key is not None else None
        return True

    async def _log_first_polls(self, names: list[MonitorName]) -> None:
        started = {n: self.registry.entries[n].monitor for n in names
                   if n in self.registry.entries}
        results = await self.first_polls(list(started), FIRST_POLL_LOG_WAIT)
        for name, result in results.items():
            entry = self.registry.entries.get(MonitorName(name))
            if entry is None or entry.monitor is not started[MonitorName(name)]:
                continue  # stopped or replaced meanwhile: its successor reports

            if result["status"] == "ok":
                log.info("first poll ok: %s", name)
            elif result["status"] == "failed":
                log.warning("first poll failed: %s: %s", name, result["error"])
            else:
                log.warning("first poll of %s not done after %gs", name, FIRST_POLL_LOG_WAIT)

    async def first_polls(self, names: list[MonitorName], timeout: float
                          ) -> dict[str, dict[str, Any]]:
        """name -> ``{"status": "ok"|"failed"|"pending", "error"}`` within ``timeout`` s."""
        if not names:
            return {}
        raw = await self._engine.wait_first_poll(list(names), max(0.0, timeout))
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            result = raw.get(name)
            if result is None:
                out[name] = {"status": "pending", "error": None}
            elif getattr(result, "ok", False):
                out[name] = {"status": "ok", "error": None}
            else:
                out[name] = {"status": "failed", "error": str(getattr(result, "error", ""))}
        return out

    async def _loop(self, watcher: watch.Watcher) -> None:
        assert self._stopping is not None and self._trigger is not None
        next_resync = time.monotonic() + self.options.resync
        while not self._stopping.is_set():
            due = next_resync if self._pause_due is None else min(next_resync, self._pause_due)
            left = max(0.0, due - time.monotonic())
            reasons = await self._trigger.wait(min(LOCK_CHECK, left))
            if self._stopping.is_set() or self._lock_lost():
                break
            now = time.monotonic()
            expired = self._pause_due is not None and now >= self._pause_due
            if reasons is None and now < next_resync and not expired:
                continue  # a lock check only
            watcher.ensure()
            if expired:
                self._pause_due = None  # re-armed by the reconcile (not retried in a loop)
            if self._reload_requested:
                self._reload_requested = False
                await self._reload()
                next_resync = now + self.options.resync  # [daemon] resync may have changed
                trigger = "SIGHUP"
            elif reasons is None and now >= next_resync:
                next_resync = now + self.options.resync
                trigger = "resync"
            elif reasons is None:
                trigger = "pause expiry"
            elif all(r.startswith("auto-pause") for r in reasons):
                trigger = "auto-pause"
            else:  # the monitors that changed are logged, not raw file events (temp names)
                trigger = "file change"
            try:
                await self.reconcile(trigger=trigger)
            except errors.MonitorsError as e:
                log.error("reconcile failed: %s (will retry)", e)
            except Exception:
                log.exception("reconcile failed (a bug; will retry)")

    def _lock_lost(self) -> bool:
        """True (once logged) when ``daemon.lock`` is gone or replaced; see step 6."""
        if self.lost is None:
            self.lost = self.lock.lost()
            if self.lost is not None:
                log.error("state directory lost under the running daemon: %s; stopping "
                          "every monitor and exiting (a daemon started since owns it)",
                          self.lost)
                if self._store is not None:
                    self._store.readonly = True  # never write into another daemon's store
        return self.lost is not None

    async def _once(self, started: list[MonitorName]) -> int:
        deadline = time.monotonic() + self.options.once_wait
        results = await self._unless_stopped(self.first_polls(started, self.options.once_wait))
        if results is None:
            return 0
        failed = 0
        for name, result in sorted(results.items()):
            if result["status"] == "ok":
                log.info("polled %s", name)
            elif result["status"] == "failed":
                failed += 1
                log.warning("poll failed: %s: %s", name, result["error"])
            else:
                failed += 1
                log.warning("no poll of %s within %gs", name, self.options.once_wait)
        left = max(1.0, deadline - time.monotonic())
        if not await self._unless_stopped(self._dispatcher.drain(left)):
            log.warning("dispatches still in flight after %gs: they stay recorded and are "
                        "recovered at the next start", left)
        return 0

    async def _demo_loop(self) -> None:
        path = self.cfg.root / DEMO_FILE
        n = 0
        while True:
            n += 1
            text = f"demo tick {n} at {snapshot.now_iso()}\n"
            try:
                await asyncio.to_thread(_write_demo, path, text)
            except OSError as e:
                log.error("demo: cannot write %s: %s (the demo stops; the daemon goes on)",
                          path, e.strerror or e)
                return
            log.info("demo: wrote %s (tick %d)", path, n)
            await asyncio.sleep(DEMO_INTERVAL)

    async def _unless_stopped(self, coro: Any) -> Any:
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

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._engine is not None:
            try:
                await self._engine.close()
            except Exception:
                log.exception("closing the engine failed")
        if self._dispatcher is not None:
            with contextlib.suppress(Exception):
                await self._dispatcher.drain(SHUTDOWN_DRAIN)
            with contextlib.suppress(Exception):
                await self._dispatcher.close()
        if self._ctx is not None:
            with contextlib.suppress(Exception):
                await self._ctx.aclose()
        if self._store is not None:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(self._store.flush)
        self.registry.running = False
        if self.lost is not None:
            log.info("stopped (%d monitors were running); state directory lost, nothing "
                     "published", len(self.registry.entries))
            return
        try:
            await asyncio.to_thread(registry_mod.publish, self.cfg.state_dir, self.registry)
        except OSError as e:
            log.error("cannot publish running.json at exit: %s", client.state_error(
                self.cfg.state_dir, e))
        log.info("stopped (%d monitors were running)", len(self.registry.entries))

    # -- control API -------------------------------------------------------------

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one control request (protocol in ``daemon.control``)."""
        op = request.get("op")
        if op == "status":
            return self.status()
        if op == "reconcile":
            wait = float(request.get("wait") or 0.0)
            plan, applied = await self.reconcile(
                trigger="apply", allow_mass_stop=bool(request.get("allowMassStop")))
            names = list(dict.fromkeys([*applied.started,
                                        *(MonitorName(n) for n in request.get("names") or ())]))
            names = [n for n in names if n in self.registry.entries]
            polls = await self.first_polls(names, wait) if wait > 0 else {}
            return {"ok": True, "plan": plan.to_json(), "generation": self.registry.generation,
                    "applied": {"started": applied.started, "stopped": applied.stopped,
                                "updated": applied.updated, "failed": applied.failed,
                                "held": [c.name for c in applied.held]},
                    "firstPolls": polls}
        if op == "first-polls":
            running = [MonitorName(n) for n in request.get("names") or ()
                       if MonitorName(n) in self.registry.entries]
            wait = float(request.get("wait") or 0.0)
            return {"ok": True, "firstPolls": await self.first_polls(running, wait)}
        if op == "evaluate-now":
            wanted = request.get("names")
            names = sorted(self.registry.entries) if wanted is None else [
                MonitorName(n) for n in wanted]
            results: dict[str, dict[str, Any]] = {}
            for name in names:
                entry = self.registry.entries.get(name)
                if entry is None:
                    results[name] = {"status": "failed", "error": "not running on this device"}
                    continue
                try:
                    result = await self._engine.poll_once(entry.monitor)
                    ok = bool(getattr(result, "ok", True))
                    results[name] = {"status": "ok" if ok else "failed",
                                     "error": None if ok else str(getattr(result, "error", ""))}
                except Exception as e:
                    results[name] = {"status": "failed", "error": str(e)}
            return {"ok": True, "results": results}
        if op == "clear-autopause":
            target = str(request.get("name") or "")
            cleared = bool(self._guard.clear(target)) if self._guard is not None else False
            plan, _ = await self.reconcile(trigger=f"resume {target}")
            return {"ok": True, "cleared": cleared, "summary": plan.summary()}
        return {"ok": False, "error": f"unknown op {op!r} (status, reconcile, first-polls, "
                "evaluate-now, clear-autopause)"}

    def status(self) -> dict[str, Any]:
        """The ``status`` reply."""
        return {
            "ok": True,
            "pid": os.getpid(),
            "device": self.cfg.device,
            "root": str(self.cfg.root),
            "stateDir": str(self.cfg.state_dir),
            "startedAt": self.registry.daemon_started_at,
            "generation": self.registry.generation,
            "revision": {"commit": self.registry.commit, "dirty": self.registry.dirty},
            "running": sorted(self.registry.entries),
            "held": list(self.registry.held),
            "problems": list(self.last.problems),
            "writeErrors": self._store.write_errors() if self._store is not None else {},
            "settingsDigest": client.settings_digest(self.cfg),  # a SIGHUP may change it
            "lastReconcile": {"at": self.last.at, "summary": self.last.summary,
                              "trigger": self.last.trigger},
        }


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def _write_demo(path: Path, text: str) -> None:
    atomic.make_dirs(path.parent)  # below the (private) state directory
    atomic.write_bytes(path, text.encode("utf-8"), durable=False)


def applied_names(plan: plan_mod.Plan, applied: supervisor.Applied) -> str:
    """``started a, b; replaced c; stopped d; failed e`` naming the monitors that changed
    (``renamed x -> y`` for a rename), for the daemon log."""
    started = set(applied.started)
    renames = {c.name: c.old_name for c in plan.changes if c.action.value == "rename"}
    replaced = {c.name for c in plan.changes if c.action.value == "replace"}
    parts: list[str] = []
    groups = (
        ("started", sorted(n for n in started if n not in replaced and n not in renames)),
        ("replaced", sorted(n for n in started if n in replaced)),
        ("renamed", sorted(f"{renames[n]} -> {n}" for n in started if n in renames)),
        ("updated", sorted(applied.updated)),
        ("stopped", sorted(applied.stopped)),
        ("failed", sorted(applied.failed)),
    )
    for verb, names in groups:
        if names:
            parts.append(f"{verb} {', '.join(names)}")
    return "; ".join(parts) or "nothing changed"


def resync_seconds(cfg: settings.Settings) -> float:
    """``[daemon] resync`` from monitors.toml (a duration), default 60 s.

    Raises:
        errors.ConfigError: not a duration.
    """
    from reconciler import durations

    raw = cfg.section("daemon").get("resync")
    if raw is None:
        return watch.DEFAULT_RESYNC
    try:
        return max(1.0, durations.parse(raw))
    except ValueError as e:
        raise errors.ConfigError(f"monitors.toml: daemon.resync: {e}") from e
