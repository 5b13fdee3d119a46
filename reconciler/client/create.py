"""Writing a new monitor file, the way ``monitors add`` does: the core that ``add`` and
the MCP tools (``monitor_watch``, ``monitor_update``) share.

The steps: refuse a taken name and a behaviour (fingerprint) that exists already in
either layer or on a reachable fleet peer (``config.authoring.duplicates``,
``client.fleet.duplicates``); write the document canonically
(``config.writer.monitor_yaml``) atomically; lint it as ``monitors lint`` does (agent,
routine and channel names against monitors.toml included); on a lint error, put back
what was there (nothing, or the previous bytes) and raise. Prints nothing.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.config import normalize, writer
from reconciler.config.authoring import duplicates, locate
from reconciler.model import Monitor, Severity
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.client.fleet import PeerDuplicates
    from reconciler.config.loader import LoadResult
    from reconciler.config.problems import Problem


class NotLinted(errors.ConfigError):
    """The written file had lint errors; it was taken back (nothing changed).

    Attributes:
        problems: every problem lint found (errors and warnings), sorted.
    """

    def __init__(self, message: str, problems: list[Problem]) -> None:
        super().__init__(message)
        self.problems = problems


@dataclass(frozen=True)
class Checked:
    """The collisions of a new monitor that ``force`` let through (none when refused).

    Attributes:
        system: the built-in of the same name it shadows, or None.
        behaviour: the same-behaviour monitors of this repository (messages).
        peers: what the fleet check found and whom it could not consult.
    """

    system: Path | None
    behaviour: list[str]
    peers: PeerDuplicates

    @property
    def duplicate(self) -> bool:
        """A deliberate duplicate: ``allowDuplicate: true`` must be written."""
        return bool(self.behaviour or self.peers.found)


@dataclass(frozen=True)
class Written:
    """A file written and linted: ``path``, the monitor as written, lint's warnings."""

    path: Path
    monitor: Monitor
    problems: list[Problem] = field(default_factory=list)


def check_new(settings: Settings, monitor: Monitor, *, loaded: LoadResult,
              force: bool = False, replacing: bool = False, hint: str | None = None
              ) -> Checked:
    """Refuse a name or behaviour that exists already, naming the match.

    Args:
        monitor: the monitor to write (normalized, its ``fingerprint`` set).
        force: let a built-in be shadowed and a duplicate be declared (``add --force``).
        replacing: the user file of ``monitor.name`` is being replaced (``monitor_update``):
            the name is not a collision, and neither is its own behaviour.
        hint: what to do instead, for a caller without ``--force`` (the MCP tools); by
            default the messages suggest ``--force``.

    Raises:
        errors.UsageError: the name is taken (a user monitor, or a built-in without
            ``force``), or the behaviour exists here or on a reachable peer (without
            ``force``); the message names the match.
    """
    name = monitor.name
    dup_hint = hint or "pass --force if deliberate: writes allowDuplicate: true"
    found = locate.find(settings, name, loaded=loaded)
    if found.user is not None and not replacing:
        raise errors.UsageError(
            f"a monitor named {name!r} already exists ({locate.shown(settings, found.user)}); "
            f"change it with `monitors edit {name}` or pick another name")
    if found.system is not None and found.user is None and not force:
        raise errors.UsageError(
            f"{name!r} is a built-in ({locate.shown(settings, found.system)}); "
            + (hint or "pick another name, or pass --force to shadow it with this user "
               "monitor (it then no longer follows upstream)"))
    dupes = [c.message for c in duplicates.conflicts(settings, monitor, loaded=loaded)
             if c.kind == "behaviour"]
    if dupes and not force:
        raise errors.UsageError(
            "same behaviour already exists: " + "; ".join(dupes)
            + f" (one trigger would fire twice; {dup_hint})")
    from reconciler.client import fleet as fleet_client

    peers = fleet_client.duplicates(settings, monitor.fingerprint, name=name)
    if peers.found and not force:
        raise errors.UsageError(
            "same behaviour already exists on another device: " + "; ".join(
                f"{other!r} on {device}" for device, other in peers.found)
            + f" (one trigger would fire twice; {dup_hint})")
    return Checked(found.system if found.user is None else None, dupes, peers)


def _forget_stop(settings: Settings, name: str) -> None:
    """A monitor file written for ``name`` ends an earlier ``monitor_stop``: its record
    (``stopped.json``) no longer describes this monitor."""
    from reconciler.state import store as store_mod

    if (settings.state_dir / "monitors" / name).is_dir():
        store_mod.Store(settings.state_dir).clear_stopped(name)


def write(settings: Settings, name: str, doc: dict[str, Any], *, command: str,
          path: Path | None = None) -> Written:
    """Write ``doc`` as ``path`` (default ``monitors.d/NAME.yml``), then lint it.

    An existing file is replaced atomically; when lint finds an error the previous
    bytes are put back (or the new file and the folders made for it are removed).
    Once written, an earlier stop record of ``name`` is forgotten.

    Args:
        doc: the monitor document (schema shape; ``name`` is set here).
        command: the command line or tool call named in the file's header.

    Raises:
        NotLinted: the file has lint errors (nothing changed).
        errors.ConfigError: the file cannot be written.
    """
    from reconciler.actions import checks
    from reconciler.config import lint
    from reconciler.config import problems as problems_mod

    target = path or settings.user_dir / f"{name}.yml"
    previous: bytes | None = None
    with contextlib.suppress(OSError):
        previous = target.read_bytes()
    body = {"name": name, **{k: v for k, v in doc.items() if k != "name"}}
    text = writer.monitor_yaml(body, root=settings.root, target=target, command=command)
    created_dirs = [d for d in (target.parent, *target.parent.parents) if not d.exists()]
    writer.atomic_write(target, text)
    check, settings_problems = checks.bound(settings, partial=True)
    report = lint.run(settings, [target], action_check=check)
    found = sorted(report.problems + settings_problems)
    if problems_mod.counts(found)[0]:
        if previous is not None:
            writer.atomic_write(target, previous.decode("utf-8", errors="surrogateescape"))
        else:
            target.unlink(missing_ok=True)
            for folder in created_dirs:  # deepest first; only folders made for it
                with contextlib.suppress(OSError):
                    folder.rmdir()
        first = next(p for p in found if p.severity is Severity.ERROR)
        raise NotLinted(f"{name} does not pass lint: {first.format()}", found)
    _forget_stop(settings, name)
    return Written(target, normalize.monitor(body, name=name), found)
