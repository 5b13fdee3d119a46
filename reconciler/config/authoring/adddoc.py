"""``add``'s flags -> the monitor document it writes.

``build_doc`` assembles exactly one source (the source types' own flags,
``sources.registry``; ``--watch-pid`` refuses a dead pid unless forced), at most one
condition, exactly one action (``actions.registry``), placement and rate limit, then
checks the document against ``schemas/monitor.schema.json`` with its regexes compiled,
before anything is written.

Must not read the repository or write files: the duplicate checks are
``duplicates``', writing is ``writer``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import durations, errors
from reconciler.actions import registry as actions_registry
from reconciler.conditions import lifecycle
from reconciler.conditions import registry as condition_registry
from reconciler.conditions import spec as condition_spec
from reconciler.config import schemas, writer
from reconciler.config.authoring import arguments
from reconciler.sources import fields as source_fields
from reconciler.sources import registry as source_types

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
        until, stop_after, stop_when: ``--until`` (a date-time or duration),
            ``--stop-after N`` (fires), ``--stop-when RE`` (``conditions.lifecycle``).
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
    until: str | None = None
    stop_after: int | None = None
    stop_when: str | None = None


def lifecycle_fields(req: AddRequest) -> dict[str, Any]:
    """``until``, ``stopAfter`` and ``stopWhen`` from ``--until``, ``--stop-after`` and
    ``--stop-when`` (None when not given).

    Raises:
        errors.UsageError: ``--until`` is neither a date-time nor a duration, ``--stop-after``
            is below 1, or ``--stop-when`` does not compile.
    """
    if req.until is not None:
        try:
            lifecycle.parse_until(req.until)
        except ValueError as e:
            raise errors.UsageError(f"--until: {e}") from None
    if req.stop_after is not None and req.stop_after < 1:
        raise errors.UsageError(f"--stop-after: expected a number of fires >= 1, "
                                f"got {req.stop_after}")
    return {"until": req.until,
            "stopAfter": {"fires": req.stop_after} if req.stop_after is not None else None,
            "stopWhen": (None if req.stop_when is None
                         else condition_spec.regex_flag(req.stop_when, "--stop-when"))}


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
    values = {kind: getattr(req, kind.ADD.dest) for kind in actions_registry.TYPES.values()}
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
    arguments.check_name(req.name)
    if req.device and req.devices:
        raise errors.UsageError("give --device (the owner) or --devices (an allowlist), not both")
    if req.device:
        arguments.check_device(req.device)
    for d in req.devices:
        arguments.check_device(d, flag="--devices")
    doc: dict[str, Any] = {
        "name": req.name,
        "description": req.description or None,
        "source": build_source(req),
        "condition": build_condition(req),
        "action": build_action(req),
        "labels": arguments.parse_labels(req.labels) or None,
        "device": req.device or None,
        "devices": list(req.devices) or None,
        "rateLimit": parse_rate_limit(req.rate_limit) if req.rate_limit else None,
        **lifecycle_fields(req),
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
