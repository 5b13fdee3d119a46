"""The overlay commands' rules (``pause``, ``resume``, ``pin``, ``unpin``): which
monitors they act on (NAME or ``-l KEY=VALUE``), ``pause --until``, and how a new
pause merges with the one already there.

Overlays are read and written only through ``writer``; must not touch a monitor file
of either layer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.config import writer
from reconciler.config.authoring import arguments, locate
from reconciler.model import Monitor, MonitorName, Pause
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.config.loader import LoadResult


def select(monitors: Mapping[MonitorName, Monitor], labels: Mapping[str, str]) -> list[Monitor]:
    """The monitors whose labels include every ``KEY=VALUE`` of ``labels``, by name."""
    return [m for name, m in sorted(monitors.items())
            if all(m.labels.get(k) == v for k, v in labels.items())]


def targets(settings: Settings, *, name: str | None, labels: Sequence[str],
            loaded: LoadResult) -> list[str]:
    """The monitors an overlay command acts on: ``NAME``, or every monitor whose labels
    match all ``-l KEY=VALUE``.

    Raises:
        errors.UsageError: both or neither of NAME and ``-l`` given.
        errors.NotFoundError: no monitor called NAME, or none matches the labels.
    """
    if name and labels:
        raise errors.UsageError("give a monitor NAME or -l KEY=VALUE, not both")
    if not name and not labels:
        raise errors.UsageError("give a monitor NAME or -l KEY=VALUE")
    if name:
        arguments.check_name(name)
        known = name in loaded.monitors or name in loaded.invalid
        if not known and not locate.find(settings, name, loaded=loaded).exists:
            raise errors.NotFoundError(
                f"no monitor named {name!r} in {locate.shown(settings, settings.user_dir)}/ or "
                f"{locate.shown(settings, settings.system_dir)}/"
            )
        return [name]
    wanted = arguments.parse_labels(labels, flag="-l")
    chosen = [str(m.name) for m in select(loaded.monitors, wanted)]
    if not chosen:
        shown = ", ".join(f"{k}={v}" for k, v in wanted.items())
        raise errors.NotFoundError(f"no monitor has labels {shown}")
    return chosen


UNTIL_NEVER = "never"
"""``pause --until never``: clear the expiry of an existing pause (paused until resumed)."""


def until_arg(value: str | None, *, now: dt.datetime | None = None) -> str | writer.Unset | None:
    """``pause --until``: not given -> ``writer.UNSET`` (keep an existing expiry),
    ``never`` -> None (clear it), else an aware ISO-8601 UTC time (``writer.parse_until``).

    Raises:
        errors.UsageError: neither ``never``, a duration nor a future ISO time.
    """
    if value is None:
        return writer.UNSET
    if value.strip().lower() == UNTIL_NEVER:
        return None
    return writer.parse_until(value, now=now)


@dataclass(frozen=True)
class Paused:
    """What ``pause`` did to one monitor.

    Attributes:
        name: the monitor.
        path: its overlay file.
        pause: the pause now written.
        kept: fields kept from the pause that was already there (``until``, ``reason``)
            because they were not given again.
        cleared: fields of that pause removed on request (``until`` for ``--until never``).
        expired: the ``until`` of a previous pause that had already expired (it was
            replaced by a new pause, nothing kept), else None.
    """

    name: str
    path: Path
    pause: Pause
    kept: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    expired: str | None = None


def _existing_pause(settings: Settings, name: str) -> Pause | None:
    raw = current_overlay(settings, name).get("pause")
    if not isinstance(raw, Mapping):
        return None
    until = raw.get("until")
    return Pause(reason=str(raw.get("reason") or ""), until=str(until) if until else None,
                 author=str(raw.get("author") or ""), created=str(raw.get("created") or ""))


def pause(settings: Settings, names: Sequence[str], *, reason: str | None,
          until: str | writer.Unset | None, author: str, command: str,
          now: dt.datetime | None = None) -> list[Paused]:
    """Write a pause overlay for each of ``names`` (pins kept).

    Pausing a monitor that is already paused keeps what is not given again: an
    omitted ``reason`` or ``until`` keeps the existing one (a temporary pause never
    silently becomes permanent); a given one replaces it; ``until=None`` clears the
    expiry. ``author`` and ``created`` are those of the existing pause when nothing
    changed, else the new ones. A pause whose expiry has passed is replaced by a
    fresh pause (nothing kept).

    Args:
        reason: the new reason (``""`` clears it), or None to keep the existing one.
        until: an aware ISO-8601 expiry (``until_arg``), None for no expiry, or
            ``writer.UNSET`` to keep the existing one.
        author: ``Name <email>`` from git config, may be empty.
        now: aware current time, for expiry (default: now).

    Raises:
        errors.ConfigError: an overlay cannot be read or written.
    """
    from reconciler.config import overlays

    now = now or dt.datetime.now(dt.UTC)
    created = now.astimezone(dt.UTC).replace(microsecond=0).isoformat()
    out = []
    for name in names:
        previous = _existing_pause(settings, name)
        expired = None
        if previous is not None and overlays.is_expired(previous, now):
            expired, previous = previous.until, None
        kept: list[str] = []
        cleared: list[str] = []
        new_until: str | None
        if isinstance(until, writer.Unset):
            new_until = previous.until if previous else None
            if new_until:
                kept.append("until")
        else:
            new_until = until
            if until is None and previous is not None and previous.until:
                cleared.append("until")
        if reason is None:
            new_reason = previous.reason if previous else ""
            if new_reason:
                kept.append("reason")
        else:
            new_reason = reason
        if previous is not None and (previous.reason, previous.until) == (new_reason, new_until):
            p = previous
        else:
            p = Pause(reason=new_reason, until=new_until, author=author, created=created)
        path = writer.write_overlay(settings, name, pause=p, command=command)
        if path is not None:  # always: a pause is never empty
            out.append(Paused(name, path, p, tuple(kept), tuple(cleared), expired))
    return out


def current_overlay(settings: Settings, name: str) -> dict[str, Any]:
    """The raw mapping of ``name``'s overlay (``{}`` when there is none)."""
    return writer.read_overlay_doc(writer.overlay_path(settings, name))
