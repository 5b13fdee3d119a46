"""Git mode: the ``[git]`` settings and the files of a followed ref's commit.

With ``[git] ref`` in the local ``monitors.toml`` the daemon runs what a commit holds,
never the working tree (Flux and Argo CD reconcile to a revision the same way):

* ``GitSettings`` is the ``[git]`` table: ``ref``, ``fetch`` (seconds between fetches
  of a remote-tracking ref, jittered by ``jittered``), ``url`` (the daemon keeps its own
  bare mirror under the state directory, so a device needs no checkout), ``verify``
  (``"signed"``: only commits ``git verify-commit`` accepts, against ``allowedSigners``
  or the gpg keyring ``gpgHome``).
* ``Follower`` fetches, resolves the ref to a commit, verifies it, and ``export``s the
  commit's ``monitors.toml``, fleet file (and the ``caFile`` bundles it names by a
  relative path inside the tree) and layer folders, read as blobs from the
  object database (``gitrepo.read_blobs``), into ``<state>/git-trees/<commit>/``: the
  user's working tree and index are never read or written. ``Target.settings`` is
  rooted there, so the loader reads the commit as it reads a checkout.
* Settings split (``merged_toml``): the device's own settings (``LOCAL``: ``device``,
  ``stateDir``, ``git``, ``http``, ``etcd``, ``daemon``) come from the local
  ``monitors.toml`` the daemon was started with; the shared ones (agents, routines,
  channels, owner, layers, fleet, system) from the commit. Where both set a value the
  local one wins (tables merge key by key).

Must not: touch the working tree or index; asyncio, click or printing.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler import durations, errors, settings
from reconciler.config import gitrepo
from reconciler.config.gitrepo import GitError

LOCAL = ("device", "stateDir", "git", "http", "etcd", "daemon")
"""Top-level keys of ``monitors.toml`` that belong to the device, never to the followed tree."""
TREES_DIR = "git-trees"
KEEP_TREES = 3
JITTER = 0.1
"""``fetch`` intervals vary by +-10 % so that a fleet does not fetch in step."""


@dataclass(frozen=True, slots=True)
class GitSettings:
    """The ``[git]`` table of the local ``monitors.toml`` (``settings.schema.json``).

    Attributes:
        ref: what to follow: ``origin/main``, ``main``, ``HEAD``, a tag or a commit id.
        fetch: seconds between fetches of a remote-tracking ref (or of ``url``).
        url: a repository to mirror into ``<state>/git-mirror.git``; None: the
            repository holding the root.
        verify: ``"signed"`` to apply only commits ``git verify-commit`` accepts.
        allowed_signers: the ssh ``allowedSignersFile`` for ``verify``.
        gpg_home: the gpg keyring directory (``GNUPGHOME``) for ``verify``.
    """

    ref: str
    fetch: float = 60.0
    url: str | None = None
    verify: str | None = None
    allowed_signers: Path | None = None
    gpg_home: Path | None = None


def git_settings(cfg: settings.Settings) -> GitSettings | None:
    """``[git]`` of ``cfg`` (local mode: None when it has no ``ref``); paths relative to
    the root. Values are checked by the settings schema first.

    Raises:
        errors.ConfigError: ``fetch`` is not a duration.
    """
    table = cfg.section("git")
    ref = table.get("ref")
    if not isinstance(ref, str) or not ref:
        return None
    fetch = 60.0
    if table.get("fetch") is not None:
        try:
            fetch = max(1.0, durations.parse(table["fetch"]))
        except ValueError as e:
            raise errors.ConfigError(f"{settings.SETTINGS_FILE}: git.fetch: {e}") from e

    def path(key: str) -> Path | None:
        value = table.get(key)
        return cfg.root / os.path.expanduser(str(value)) if value else None

    return GitSettings(ref=ref, fetch=fetch, url=table.get("url") or None,
                       verify=table.get("verify") or None,
                       allowed_signers=path("allowedSigners"), gpg_home=path("gpgHome"))


def jittered(seconds: float, rng: random.Random | None = None) -> float:
    """``seconds`` +-``JITTER`` (uniform): the delay until the next fetch."""
    return seconds * (1 + (rng or random).uniform(-JITTER, JITTER))


def merged_toml(local: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """The settings in force in git mode: ``shared`` (the commit's ``monitors.toml``)
    without its ``LOCAL`` keys, then ``local`` on top (tables merged key by key, the
    local value winning)."""
    out: dict[str, Any] = {k: v for k, v in shared.items() if k not in LOCAL}
    for key, value in local.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class Target:
    """One commit of the followed ref, exported.

    Attributes:
        commit: the commit id.
        tree: the id of the commit's root tree.
        settings: the settings in force (``merged_toml``), rooted at the export.
    """

    commit: str
    tree: str
    settings: settings.Settings


class Follower:
    """Follows ``[git] ref`` for the daemon started with ``cfg`` (local settings).

    Not thread-safe: one caller at a time (the daemon's reconcile lock).
    """

    def __init__(self, cfg: settings.Settings, git: GitSettings) -> None:
        self.cfg = cfg
        self.git = git
        self._repo: Any = None
        self._prefix = ""

    def _open(self) -> Any:
        if self._repo is None:
            if self.git.url:
                self._repo = gitrepo.open_mirror(self.cfg.state_dir)
            else:
                self._repo = gitrepo.open_repository(self.cfg.root)
                self._prefix = gitrepo.tracked_paths(self._repo, self.cfg.root)
        return self._repo

    @property
    def remote(self) -> bool:
        """True when a fetch can move the ref (``url``, or a remote-tracking ref)."""
        return bool(self.git.url) or gitrepo.remote_of(self._open(), self.git.ref) is not None

    def _ref(self) -> str:
        ref = self.git.ref
        if self.git.url and not ref.startswith(("refs/", gitrepo.MIRROR_REMOTE + "/")) \
                and ref != "HEAD":
            return f"{gitrepo.MIRROR_REMOTE}/{ref}"
        return ref

    def remote_url(self) -> str | None:
        """The URL fetches read from: ``[git] url``, else the URL of the followed
        remote-tracking ref's remote; None for a local ref (or an unreadable repository)."""
        if self.git.url:
            return self.git.url
        try:
            repo = self._open()
            name = gitrepo.remote_of(repo, self.git.ref)
            return str(repo.remotes[name].url) if name is not None else None
        except Exception:
            return None

    def fetch(self) -> None:
        """Fetch what can move the ref (nothing for a local ref).

        Raises:
            GitError: the fetch failed.
        """
        repo = self._open()
        if self.git.url:
            gitrepo.fetch_url(repo, self.git.url)
            return
        remote = gitrepo.remote_of(repo, self.git.ref)
        if remote is not None:
            gitrepo.fetch_remote(repo, remote)

    def resolve(self) -> str:
        """The commit the ref names now (no fetch).

        Raises:
            GitError: not a repository, or the ref names no commit (deleted).
        """
        ref = self._ref()
        try:
            return gitrepo.resolve_ref(self._open(), ref)
        except GitError as e:
            raise GitError(f"ref {self.git.ref!r}: no such branch, tag or commit "
                           f"(deleted?)") from e

    def verify(self, commit: str) -> str | None:
        """Why ``commit`` may not be applied under ``verify = "signed"``, else None."""
        if self.git.verify != "signed":
            return None
        why = gitrepo.verify_commit(self._open(), commit,
                                    allowed_signers=self.git.allowed_signers,
                                    gpg_home=self.git.gpg_home)
        return None if why is None else f"{commit[:12]} is not signed by an allowed key: {why}"

    def export(self, commit: str, into: Path | None = None) -> Target:
        """Export ``commit``'s settings, fleet file and layers (see the module docstring)
        into ``into`` (default: ``<state>/git-trees``); an export already made is reused.

        Raises:
            GitError: ``commit`` is unknown.
            errors.ConfigError: the commit's ``monitors.toml`` is invalid TOML.
        """
        self._open()
        return export(self._repo, commit, self.cfg, prefix=self._prefix, into=into)

    def head(self, into: Path) -> Target:
        """Fetch, resolve and verify the ref as the daemon does, and export its commit
        into ``into``: what ``monitors apply`` plans in git mode.

        Raises:
            GitError: the fetch failed, the ref names no commit, or ``verify`` refuses it.
        """
        self.fetch()
        commit = self.resolve()
        why = self.verify(commit)
        if why is not None:
            raise GitError(f"[git] verify: {why}")
        return self.export(commit, into)


def _inside(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def export(repo: Any, commit: str, local: settings.Settings, *, prefix: str = "",
           into: Path | None = None) -> Target:
    """Export ``commit``'s files under ``prefix`` (the monitors root in the repository)
    into ``into`` (default ``<state>/git-trees/<commit>``) and return its ``Target``.

    Raises:
        GitError: ``commit`` is unknown.
        errors.ConfigError: the commit's ``monitors.toml`` is invalid TOML.
    """
    base = into if into is not None else local.state_dir / TREES_DIR
    dest = base / commit
    top_id, top = gitrepo.read_blobs(repo, commit, [_inside(prefix, settings.SETTINGS_FILE)])
    if not (dest / ".complete").exists():
        tmp = base / f".{commit}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        _write(tmp, prefix, top)
        shared = settings.read_toml(tmp / settings.SETTINGS_FILE)
        toml = merged_toml(local.toml, shared)
        wanted = [_inside(prefix, d) for d in _shared_paths(toml)]
        _, files = gitrepo.read_blobs(repo, commit, wanted)
        _write(tmp, prefix, files)
        fleet_rel = str(_table(toml, "fleet").get("file", settings.FLEET_FILE))
        cas = [_inside(prefix, ca) for ca in _ca_files(tmp, fleet_rel)]
        if cas:
            _write(tmp, prefix, gitrepo.read_blobs(repo, commit, cas)[1])
        (tmp / ".complete").write_bytes(b"")
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
        if into is None:
            _prune(base, keep=commit)
    shared = settings.read_toml(dest / settings.SETTINGS_FILE)
    return Target(commit=commit, tree=top_id, settings=rooted(local, dest, shared))


def _table(toml: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = toml.get(key)
    return value if isinstance(value, Mapping) else {}


def _shared_paths(toml: Mapping[str, Any]) -> list[str]:
    layers, fleet = _table(toml, "layers"), _table(toml, "fleet")
    user = str(layers.get("user", settings.USER_DIR))
    return [user, str(layers.get("system", settings.SYSTEM_DIR)),
            str(layers.get("overlays", f"{user}/{settings.OVERLAYS_DIR}")),
            str(fleet.get("file", settings.FLEET_FILE))]


def _ca_files(tree: Path, fleet_rel: str) -> list[str]:
    """The ``caFile`` values of the exported fleet file ``tree/fleet_rel`` that are
    relative paths inside the tree (``fleet.ca_path`` resolves them against the fleet
    file's directory), as tree paths; an absolute or ``~`` path names a file of this
    device and is not exported. A fleet file that does not load gives none (lint says
    why)."""
    import posixpath

    from reconciler.config import yamlload

    path = tree / fleet_rel
    if not path.is_file():
        return []
    doc, _ = yamlload.load(path, file=fleet_rel)
    devices = doc.data.get("devices") if doc is not None and isinstance(doc.data, dict) \
        else None
    out = []
    for device in devices if isinstance(devices, list) else ():
        ca = device.get("caFile") if isinstance(device, dict) else None
        if not isinstance(ca, str) or not ca or ca.startswith(("/", "~")):
            continue
        rel = posixpath.normpath(posixpath.join(posixpath.dirname(fleet_rel), ca))
        if rel != ".." and not rel.startswith("../"):
            out.append(rel)
    return out


def _write(dest: Path, prefix: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (paths under ``prefix``) below ``dest``: folders 0700, files 0600
    (owned by this user: the trust rule accepts them)."""
    for path, data in files.items():
        rel = path[len(prefix) + 1:] if prefix else path
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)


def _prune(base: Path, *, keep: str) -> None:
    """Remove all but the ``KEEP_TREES`` newest exports (never ``keep``)."""
    with contextlib.suppress(OSError):
        dirs = sorted((p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")),
                      key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in dirs[KEEP_TREES:]:
            if old.name != keep:
                shutil.rmtree(old, ignore_errors=True)


def rooted(local: settings.Settings, root: Path, shared: Mapping[str, Any]
           ) -> settings.Settings:
    """``local`` with the layers, fleet file and shared settings of the tree at ``root``
    (``merged_toml``); device and state directory stay ``local``'s."""
    toml = merged_toml(local.toml, shared)
    layers, fleet = _table(toml, "layers"), _table(toml, "fleet")
    user_dir = root / str(layers.get("user", settings.USER_DIR))
    return replace(
        local, root=root, user_dir=user_dir,
        system_dir=root / str(layers.get("system", settings.SYSTEM_DIR)),
        overlays_dir=root / str(layers.get("overlays",
                                           f"{user_dir.name}/{settings.OVERLAYS_DIR}")),
        fleet_file=root / str(fleet.get("file", settings.FLEET_FILE)), toml=toml)


def applied_settings(cfg: settings.Settings, commit: str | None) -> settings.Settings | None:
    """The settings rooted at the daemon's export of ``commit`` (``export``), for the
    read models of git mode (``list``, ``view``: what runs, not the working tree); None
    when ``cfg`` has no ``[git] ref``, ``commit`` is None or its export is gone."""
    if commit is None or git_settings(cfg) is None:
        return None
    dest = cfg.state_dir / TREES_DIR / commit
    if not (dest / ".complete").exists():
        return None
    try:
        return rooted(cfg, dest, settings.read_toml(dest / settings.SETTINGS_FILE))
    except errors.ConfigError:
        return None


def plan_target(cfg: settings.Settings, ref: str, into: Path) -> Target:
    """Export ``ref`` of the repository holding ``cfg.root`` into ``into`` for
    ``plan --ref`` (no fetch, no verification).

    Raises:
        GitError: no repository, or no such ref.
    """
    repo = gitrepo.open_repository(cfg.root)
    try:
        commit = gitrepo.resolve_ref(repo, ref)
    except GitError:
        raise GitError(f"--ref {ref!r}: no such branch, tag or commit") from None
    return export(repo, commit, cfg, prefix=gitrepo.tracked_paths(repo, cfg.root), into=into)
