"""Authoring: the rules behind ``add``, ``remove``, ``edit`` and the overlay commands.

The CLI parses flags into an ``AddRequest`` and calls in here; everything a user
can get wrong is raised as a one-line ``errors.MonitorsError``:

* ``build_doc``: flags -> a monitor document (exactly one source, at most one
  condition, exactly one action, placement, rate limit), then checked against
  ``schemas/monitor.schema.json`` and the regexes compiled, before anything is
  written.
* ``conflicts``: the name is taken in either layer, or the behaviour (the
  fingerprint, DESIGN.md §2) already exists under another name in either layer
  (shadowed built-ins included; a paused duplicate is still a duplicate).
* the source flags are the source types' own (``sources.registry``); ``--watch-pid``
  refuses a dead pid (zombie-aware, as the ``pid`` source reads it) unless forced.
* ``find``: where a monitor is defined (user file, built-in, or both).
* ``remove``/``copy_builtin``: delete a user file (never a built-in), and make a
  shadowing user copy of a built-in for ``edit``.

No click and no printing here. Never writes into ``system/``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler import durations, errors
from reconciler import settings as settings_mod
from reconciler.actions import registry as actions_registry
from reconciler.conditions import registry as condition_registry
from reconciler.config import normalize, schemas, writer
from reconciler.model import Monitor, MonitorName, Pause, Scope
from reconciler.settings import Settings
from reconciler.sources import fields as source_fields
from reconciler.sources import registry as source_types

if TYPE_CHECKING:
    from reconciler.config.loader import LoadResult

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
DEVICE_RE = re.compile(settings_mod.DEVICE_PATTERN)
SUFFIXES = (".yml", ".yaml")
ACTION_FLAGS = tuple(kind.ADD.flag for kind in actions_registry.TYPES.values())


@dataclass(frozen=True)
class AddRequest:
    """The flags of ``monitors add NAME`` (None / empty: not given).

    Attributes:
        sources: source type -> the value of its ``add`` flag (``sources.registry``'s
            ``ADD``), for the flags given: ``(command or URL, interval)`` for ``poll`` and
            ``poll-http``, the ``SRC:EVENT`` tuple for ``webhook``, else one value.
        conditions: condition flag ``dest`` -> its value (``conditions.registry``'s
            ``add_flags``: ``match``, ``every``, ``dedupe_key``...; None/False: not given).
        notify: None when ``--notify`` is absent, ``""`` for the default channel.
        devices: the ``--devices A,B`` list.
        rate_limit: ``MAX/PER`` such as ``5/1m``.
        interval: ``--interval`` for file, pid and device sources.
        labels: ``KEY=VALUE`` strings.
    """

    name: str
    sources: Mapping[str, Any] = field(default_factory=dict)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    run: str | None = None
    prompt: str | None = None
    routine: str | None = None
    notify: str | None = None
    webhook_out: str | None = None
    device: str | None = None
    devices: tuple[str, ...] = ()
    rate_limit: str | None = None
    interval: str | None = None
    description: str | None = None
    labels: tuple[str, ...] = ()
    force: bool = False


def check_name(name: str) -> None:
    """Raise ``errors.UsageError`` unless ``name`` is a valid monitor name."""
    if not NAME_RE.fullmatch(name):
        raise errors.UsageError(
            f"{name!r} is not a valid monitor name: lowercase letters, digits and -, "
            "starting with a letter, at most 63 characters"
        )


def check_device(device: str, *, flag: str = "--device") -> None:
    """Raise ``errors.UsageError`` unless ``device`` is a valid device name."""
    if not DEVICE_RE.fullmatch(device):
        raise errors.UsageError(
            f"{flag}: {device!r} is not a valid device name (letters, digits, '.', '_', '-')"
        )


def split_devices(value: str) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``, each checked.

    Raises:
        errors.UsageError: empty list or an invalid name.
    """
    devices = tuple(d.strip() for d in value.split(",") if d.strip())
    if not devices:
        raise errors.UsageError("--devices: expected a comma-separated list such as a,b")
    for d in devices:
        check_device(d, flag="--devices")
    if len(set(devices)) != len(devices):
        raise errors.UsageError(f"--devices: a device is listed twice in {value!r}")
    return devices


def parse_labels(values: Iterable[str], *, flag: str = "--label") -> dict[str, str]:
    """``["team=ci", ...]`` -> ``{"team": "ci"}``.

    Raises:
        errors.UsageError: an entry without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise errors.UsageError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def parse_rate_limit(value: str) -> dict[str, Any]:
    """``"5/1m"`` -> ``{"max": 5, "per": "1m"}``.

    Raises:
        errors.UsageError: not ``MAX/DURATION`` with MAX >= 1.
    """
    count, sep, per = value.partition("/")
    try:
        if not sep or not count.strip().isascii() or not count.strip().isdigit() \
                or int(count) < 1:  # ASCII digits only, as durations: not '٥/1m'
            raise ValueError
        durations.parse(per.strip())
    except durations.OutOfRange as e:
        raise errors.UsageError(f"--rate-limit: {e}") from None
    except ValueError:
        raise errors.UsageError(
            f"--rate-limit: expected MAX/DURATION such as 5/1m, got {value!r}"
        ) from None
    return {"max": int(count), "per": per.strip()}


def build_source(req: AddRequest) -> dict[str, Any]:
    """The ``source`` mapping for the one source flag given (``sources.registry``: each
    type's ``ADD`` flag and ``from_flag``).

    Raises:
        errors.UsageError: no source flag, or more than one, or ``--interval`` with a
            source that takes none, or a value the type refuses.
    """
    flags = source_types.add_flags()
    given = [(kind, flag) for kind, flag in flags if req.sources.get(kind) is not None]
    if len(given) != 1:
        which = "none" if not given else ", ".join(flag.flag for _, flag in given)
        raise errors.UsageError(f"add: give exactly one source "
                                f"({', '.join(flag.flag for _, flag in flags)}); got {which}")
    kind, flag = given[0]
    if req.interval is not None and not flag.interval:
        takes = [f.flag for _, f in flags if f.interval]
        pairs = [f.flag for _, f in flags if f.nargs == 2]
        raise errors.UsageError(
            f"--interval applies to {', '.join(takes[:-1])} and {takes[-1]}; "
            f"{' and '.join(pairs)} take their interval as a second value"
        )
    interval = source_fields.interval_flag(req.interval, "--interval") if req.interval else None
    return source_types.from_flag(kind, req.sources[kind], interval=interval, force=req.force)


def build_condition(req: AddRequest) -> dict[str, Any] | None:
    """The ``condition`` mapping, or None for the default (``on-change``; a pid
    source's default fires on exit): ``conditions.registry.from_flags``.

    Raises:
        errors.UsageError: more than one mode flag, or a regex that does not compile.
    """
    source_type = next((kind for kind, v in req.sources.items() if v is not None), "")
    return condition_registry.from_flags(req.conditions, source_type=source_type)


def build_action(req: AddRequest) -> dict[str, Any]:
    """The ``action`` mapping for the one action flag given.

    Raises:
        errors.UsageError: no action, more than one, ``--run`` without ``--prompt``,
            ``--prompt`` with an action that takes none.
    """
    values = {kind: getattr(req, kind.ADD.param) for kind in actions_registry.TYPES.values()}
    given = [kind for kind, value in values.items() if value is not None]
    if len(given) != 1:
        which = "none" if not given else ", ".join(kind.ADD.flag for kind in given)
        raise errors.UsageError(f"add: give exactly one action ({', '.join(ACTION_FLAGS)}); "
                                f"got {which}")
    [kind] = given
    if req.prompt is not None and not kind.ADD.takes_prompt:
        with_prompt = " or ".join(k.ADD.flag for k in actions_registry.TYPES.values()
                                  if k.ADD.takes_prompt)
        raise errors.UsageError(f"--prompt goes with {with_prompt}")
    return kind.from_flag(values[kind], req.prompt)


def build_doc(req: AddRequest) -> dict[str, Any]:
    """The monitor document ``add`` writes, schema-checked.

    Raises:
        errors.UsageError: any bad flag or combination (one line naming the flag).
    """
    check_name(req.name)
    if req.device and req.devices:
        raise errors.UsageError("give --device (the owner) or --devices (an allowlist), not both")
    if req.device:
        check_device(req.device)
    for d in req.devices:
        check_device(d, flag="--devices")
    doc: dict[str, Any] = {
        "name": req.name,
        "description": req.description or None,
        "source": build_source(req),
        "condition": build_condition(req),
        "action": build_action(req),
        "labels": parse_labels(req.labels) or None,
        "device": req.device or None,
        "devices": list(req.devices) or None,
        "rateLimit": parse_rate_limit(req.rate_limit) if req.rate_limit else None,
    }
    doc = writer.canonical_monitor(doc)
    check_schema(doc)
    return doc


def check_schema(doc: Mapping[str, Any]) -> None:
    """Validate ``doc`` against the monitor schema.

    Raises:
        errors.UsageError: ``field: message`` of the first schema error.
    """
    errs = sorted(schemas.validator("monitor").iter_errors(doc),
                  key=lambda e: [str(p) for p in e.instance_path])
    if errs:
        first = errs[0]
        where = ".".join(str(p) for p in first.instance_path) or "(top)"
        raise errors.UsageError(f"add: {where}: {first.message}")


# -- where monitors live -----------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    """Where a monitor name is defined: its user file and/or its built-in file."""

    name: str
    user: Path | None = None
    system: Path | None = None

    @property
    def exists(self) -> bool:
        """Defined in at least one layer."""
        return self.user is not None or self.system is not None


def _layer_file(folder: Path, name: str) -> Path | None:
    """``folder/NAME.yml`` or ``.yaml`` (the loader reads files directly in a layer)."""
    for suffix in SUFFIXES:
        path = folder / f"{name}{suffix}"
        if path.is_file():
            return path
    return None


def find(settings: Settings, name: str, *, loaded: LoadResult | None = None) -> Found:
    """Where ``name`` is defined. ``loaded`` (a ``loader.LoadResult``) is consulted
    first for a monitor's origin; the layer folders are searched for ``NAME.yml``
    and ``NAME.yaml`` otherwise (so an invalid file is still found)."""
    user = system = None
    if loaded is not None:
        monitor = loaded.monitors.get(MonitorName(name))
        if monitor is not None:
            if monitor.scope is Scope.USER:
                user = Path(monitor.origin)
            else:
                system = Path(monitor.origin)
        shadow = loaded.shadowed.get(MonitorName(name))
        if shadow is not None:
            user, system = Path(shadow.user_file), Path(shadow.system_file)
    overlays = settings.overlays_dir.resolve()
    if user is None:
        candidate = _layer_file(settings.user_dir, name)
        if candidate is not None and not candidate.resolve().is_relative_to(overlays):
            user = candidate
    if system is None:
        system = _layer_file(settings.system_dir, name)
    return Found(name, user, system)


# -- duplicates --------------------------------------------------------------------------


@dataclass(frozen=True)
class Conflict:
    """Why ``add`` refuses: ``kind`` is ``name`` or ``behaviour``."""

    kind: str
    message: str


def _shadowed_monitors(loaded: LoadResult) -> list[Monitor]:
    out: list[Monitor] = []
    from reconciler.config import yamlload

    for name, shadow in loaded.shadowed.items():
        doc, _problems = yamlload.load(Path(shadow.system_file))
        if doc is None or not isinstance(doc.data, dict):
            continue
        try:
            out.append(normalize.monitor(doc.data, name=name, scope=Scope.SYSTEM,
                                         origin=Path(shadow.system_file)))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def existing_monitors(loaded: LoadResult) -> list[Monitor]:
    """Every monitor of both layers: the resolved set plus shadowed built-ins."""
    return [*loaded.monitors.values(), *_shadowed_monitors(loaded)]


def conflicts(settings: Settings, monitor: Monitor, *, loaded: LoadResult) -> list[Conflict]:
    """Name and behaviour collisions of a new ``monitor`` with both layers.

    Args:
        loaded: a ``loader.LoadResult`` of the current repository.
    """
    out: list[Conflict] = []
    found = find(settings, monitor.name, loaded=loaded)
    if found.exists:
        where = found.user or found.system
        out.append(Conflict("name", f"a monitor named {monitor.name!r} already exists "
                                    f"({_shown(settings, where)})"))
    seen: set[str] = set()
    for other in existing_monitors(loaded):
        if other.fingerprint != monitor.fingerprint or other.name == monitor.name:
            continue
        key = f"{other.name}:{other.scope}"
        if key in seen:
            continue
        seen.add(key)
        layer = "built-in" if other.scope is Scope.SYSTEM else "user monitor"
        shown = _shown(settings, other.origin)
        out.append(Conflict("behaviour", f"{layer} {other.name!r} ({shown}) already watches "
                                         "this source, decides the same way and does the same "
                                         "thing"))
    return out


def _shown(settings: Settings, path: Path | None) -> str:
    if path is None:
        return "?"
    try:
        return str(Path(path).resolve().relative_to(settings.root))
    except ValueError:
        return str(path)


# -- remove and edit ---------------------------------------------------------------------


@dataclass(frozen=True)
class Removed:
    """What ``remove`` did: the deleted file, an orphaned overlay deleted with it,
    and the built-in that applies again (when the user file shadowed one)."""

    path: Path
    overlay: Path | None = None
    builtin: Path | None = None


def remove(settings: Settings, name: str, *, loaded: LoadResult | None = None) -> Removed:
    """Delete the user file of ``name``; a built-in is never removed.

    When no layer defines ``name`` afterwards, its overlay is deleted too.

    Raises:
        errors.NotFoundError: no monitor called ``name``.
        errors.UsageError: ``name`` is a built-in only (the message says to pause it).
    """
    found = find(settings, name, loaded=loaded)
    if found.user is None:
        if found.system is not None:
            raise errors.UsageError(
                f"{name} is a built-in ({_shown(settings, found.system)}); built-ins cannot be "
                f"removed (system/ is pull-only): pause it with `monitors pause {name}`"
            )
        raise errors.NotFoundError(f"no monitor named {name!r} in "
                                   f"{_shown(settings, settings.user_dir)}/")
    try:
        found.user.unlink()
    except OSError as e:
        raise errors.ConfigError(f"{found.user}: cannot delete: {e.strerror}") from e
    overlay = None
    if found.system is None:
        path = writer.overlay_path(settings, name)
        if path.exists():
            try:
                path.unlink()
                overlay = path
            except OSError as e:
                raise errors.ConfigError(f"{path}: cannot delete: {e.strerror}") from e
    return Removed(found.user, overlay, found.system)


def copy_builtin(settings: Settings, name: str, system_file: Path, *, command: str) -> Path:
    """Create ``monitors.d/NAME.yml`` as a copy of a built-in (it then shadows it).

    The copy keeps the built-in's bytes below a header saying where it came from
    and that it no longer receives upstream fixes.

    Raises:
        errors.ConfigError: the user file exists already or cannot be written.
    """
    target = settings.user_dir / f"{name}.yml"
    if target.exists():
        raise errors.ConfigError(f"{target}: exists already")
    body = system_file.read_text(encoding="utf-8")
    header = (f"# Copied from {_shown(settings, system_file)} by `{command}`.\n"
              "# This user copy shadows the built-in and no longer receives upstream fixes;\n"
              "# delete it to follow upstream again.\n")
    writer.atomic_write(target, header + body)
    return target


def select(monitors: Mapping[MonitorName, Monitor], labels: Mapping[str, str]) -> list[Monitor]:
    """The monitors whose labels include every ``KEY=VALUE`` of ``labels``, by name."""
    return [m for name, m in sorted(monitors.items())
            if all(m.labels.get(k) == v for k, v in labels.items())]


def command_line(words: Sequence[str]) -> str:
    """``monitors`` + the shell-quoted words, for generated headers."""
    import shlex

    return shlex.join(["monitors", *words])


# -- overlays: pause, resume, pin, unpin -----------------------------------------------------


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
        check_name(name)
        known = name in loaded.monitors or name in loaded.invalid
        if not known and not find(settings, name, loaded=loaded).exists:
            raise errors.NotFoundError(
                f"no monitor named {name!r} in {_shown(settings, settings.user_dir)}/ or "
                f"{_shown(settings, settings.system_dir)}/"
            )
        return [name]
    wanted = parse_labels(labels, flag="-l")
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
