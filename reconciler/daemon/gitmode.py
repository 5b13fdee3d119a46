"""Git mode in the daemon: which commit a reconcile applies, and what it remembers.

``Tracker.target`` runs in a worker thread at every reconcile when ``[git] ref`` is
set (``config.gitfollow``): fetch (when asked: the fetch timer, ``monitors apply``,
start), resolve the ref, verify the commit (``verify = "signed"``), export it. Any
failure is kept as ``Revisions.error`` and the last applied commit stays the target,
so a failed fetch, a deleted ref, an unsigned head or an unreadable commit keeps what
runs (Flux keeps the last applied revision the same way); a force-pushed ref is just
another commit.

``Tracker.cached`` answers a reconcile that finds the same commit, local settings and
auto-pauses (and the same last applied versions of the commit's invalid monitors) with
the snapshot already made: no file is exported and no YAML parsed (the per-commit cache
Argo CD keeps by revision).

``Tracker.watcher`` watches the refs of the repository holding the root, so a commit
to a local ref (or a fetch by someone else) reconciles at once; ``next_fetch`` is when
the daemon's loop fetches next (``[git] fetch``, jittered).

No asyncio here (``daemon.reconcile`` calls in a thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import errors, settings, snapshot
from reconciler.config import gitfollow
from reconciler.config.gitrepo import GitError
from reconciler.daemon import watch
from reconciler.model import Monitor, MonitorName

log = logging.getLogger("monitors.daemon")


def ref_change(path: str) -> bool:
    """A change of the refs (``refs/**``, ``HEAD``, ``packed-refs``), not git's lock
    files nor the objects."""
    name = os.path.basename(path)
    return not name.endswith(".lock") and ("/refs/" in path or name in ("HEAD", "packed-refs"))


@dataclass(slots=True)
class Revisions:
    """What the daemon knows about the followed ref.

    Attributes:
        ref: the ``[git] ref`` followed.
        attempted: the last commit the ref named (``lastAttemptedRevision``).
        applied: the last commit applied (``lastAppliedRevision``).
        error: why ``attempted`` is not applied, or the fetch failed, else None.
        fetched_at: Unix seconds of the last successful fetch (0: never).
    """

    ref: str
    attempted: str | None = None
    applied: str | None = None
    error: str | None = None
    fetched_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"ref", "lastAttemptedRevision", "lastAppliedRevision", "error"}``."""
        return {"ref": self.ref, "lastAttemptedRevision": self.attempted,
                "lastAppliedRevision": self.applied, "error": self.error}


def repo_name(url: str) -> str:
    """``owner/name`` (lower case) of a repository URL (https, ssh, scp-like, with or
    without ``.git``), or "" when it has no two path segments."""
    path = url.strip().rstrip("/").removesuffix(".git")
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    elif ":" in path:
        path = path.split(":", 1)[1]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:]).lower() if len(parts) >= 2 else ""


class Tracker:
    """Follows the ref for one daemon (see the module docstring).

    Args:
        local: the settings the daemon was started with (its local ``monitors.toml``).
        git: their ``[git]`` table.
        applied: the commit ``running.json`` says was applied last (None: none).
    """

    def __init__(self, local: settings.Settings, git: gitfollow.GitSettings,
                 applied: str | None = None) -> None:
        self.follower = gitfollow.Follower(local, git)
        self.revisions = Revisions(ref=git.ref, applied=applied)
        self.current: gitfollow.Target | None = None
        self._verified: dict[str, str | None] = {}
        self._snap: tuple[tuple[Any, ...], snapshot.Snapshot] | None = None

    def watcher(self, trigger: watch.Trigger) -> watch.Watcher:
        """Watch the refs (``refs/**``, ``HEAD``, ``packed-refs``) of the repository
        holding the root; with ``[git] url`` (the daemon's own mirror, moved only by its
        fetches) just the local monitors.toml."""
        from reconciler.config import gitworktree

        cfg = self.follower.cfg
        gitdir = gitworktree.git_dir(cfg.root)
        if gitdir is not None and not self.follower.git.url:
            common = gitworktree.common_dir(gitdir)
            return watch.Watcher(trigger, dirs=[common / "refs"], root=common,
                                 accept=ref_change)
        return watch.Watcher(trigger, dirs=[], root=cfg.root,
                             names=(settings.SETTINGS_FILE,))

    def next_fetch(self) -> float | None:
        """Monotonic time of the next fetch (``jittered`` ``[git] fetch``), or None when
        fetching cannot move the ref."""
        if not self.remote:
            return None
        return time.monotonic() + gitfollow.jittered(self.follower.git.fetch)

    def follows(self, repository: Mapping[str, Any]) -> bool:
        """Whether a GitHub ``push`` payload's ``repository`` is the one fetched from
        (``owner/name`` of ``clone_url``, ``ssh_url``, ``html_url`` or ``full_name``
        against the followed remote's URL, case-insensitively): the webhook hook that
        fetches and reconciles at once, as Flux's Receiver does."""
        ours = repo_name(self.follower.remote_url() or "")
        if not ours:
            return False
        theirs = {repo_name(str(repository.get(k) or ""))
                  for k in ("clone_url", "ssh_url", "html_url", "git_url", "url")}
        theirs.add(str(repository.get("full_name") or "").lower())
        return ours in theirs

    @property
    def remote(self) -> bool:
        """True when fetching can move the ref (False also when it cannot be opened)."""
        try:
            return self.follower.remote
        except GitError:
            return False

    def target(self, *, fetch: bool) -> gitfollow.Target | None:
        """The commit to apply now (the last applied one when the ref's cannot be),
        None when there is none yet. Never raises for git or file trouble: it is kept
        in ``revisions.error`` and logged once."""
        rev = self.revisions
        problem: str | None = None
        if fetch:
            try:
                self.follower.fetch()
                rev.fetched_at = time.time()
            except GitError as e:
                problem = f"fetch failed: {e}"
        try:
            commit: str | None = self.follower.resolve()
        except GitError as e:
            commit, problem = None, str(e)
        if commit is not None:
            rev.attempted = commit
            if commit not in self._verified:
                self._verified[commit] = self.follower.verify(commit)
            why = self._verified[commit]
            if why is not None:
                commit, problem = None, why
        if commit is not None and (self.current is None or self.current.commit != commit):
            try:
                self.current = self.follower.export(commit)
            except (GitError, errors.ConfigError, OSError) as e:
                problem = f"{commit[:12]}: cannot read the commit: {e}"
        elif commit is None and self.current is None and rev.applied:
            # restarted while the ref is unusable: run the last applied commit again
            with contextlib.suppress(GitError, errors.ConfigError, OSError):
                self.current = self.follower.export(rev.applied)
        if problem != rev.error:
            if problem:
                kept = rev.applied[:12] if rev.applied else "nothing"
                log.error("[git] %s; keeping %s", problem, kept)
            elif rev.error:
                log.info("[git] ref %s is usable again at %s", rev.ref,
                         (rev.attempted or "")[:12])
        rev.error = problem
        return self.current

    def cached(self, target: gitfollow.Target, autopaused: Mapping[MonitorName, str],
               last_good: Mapping[MonitorName, Monitor],
               completed: Mapping[MonitorName, tuple[str, str]]) -> snapshot.Snapshot | None:
        """The snapshot made for the same commit, local settings, auto-pauses and
        completions (``Store.completions``), when
        the last applied versions of its invalid monitors are still the ones it used
        and no pause has expired since; else None."""
        if self._snap is None or self._snap[0] != self._key(target, autopaused, completed):
            return None
        snap = self._snap[1]
        for name in snap.desired.invalid:
            used = snap.desired.monitors.get(name)
            now = last_good.get(name)
            if (used is None) != (now is None) or (
                    used is not None and now is not None and used.fingerprint != now.fingerprint):
                return None
        expiry = snap.next_pause_expiry
        if expiry is not None and expiry <= time.time():
            return None
        return snap

    def remember(self, target: gitfollow.Target, autopaused: Mapping[MonitorName, str],
                 last_good: Mapping[MonitorName, Monitor],
                 completed: Mapping[MonitorName, tuple[str, str]], snap: snapshot.Snapshot
                 ) -> snapshot.Snapshot:
        """``snapshot.at_commit`` of ``snap`` (files named as in the repository), kept for
        ``cached``; returned."""
        snap = snapshot.at_commit(snap, target.settings.root, self.follower.cfg.root,
                                  target.commit)
        self._snap = (self._key(target, autopaused, completed), snap)
        return snap

    @staticmethod
    def _key(target: gitfollow.Target, autopaused: Mapping[MonitorName, str],
             completed: Mapping[MonitorName, tuple[str, str]]) -> tuple[Any, ...]:
        return (target.commit, id(target.settings.toml), tuple(sorted(autopaused.items())),
                tuple(sorted(completed.items())))
