"""Watchers that end themselves: ``until``, ``stopAfter``, ``stopWhen``. Pure.

A per-work-item watcher (one pull request, one deploy) should end with its work item
instead of piling up. Three top-level fields say when a monitor is *completed*:

* ``until``: an ISO-8601 date-time with a time zone (or a date: midnight UTC), or a
  duration (``3d``) counted from the monitor's first start, which the engine records;
* ``stopAfter: {fires: N}``: after its Nth fire (under this fingerprint);
* ``stopWhen: REGEX``: an observation matching it (a Python ``re`` search of the
  observation text) completes it, after that observation's own decision (so
  ``merged`` can still fire its action).

A completed monitor stops polling; the engine records the reason in
``lifecycle.json`` (``state.lifecycle``), plan and list show ``completed (reason)``,
and a reconcile does not start it again while its fingerprint and these fields are
unchanged. The record's other half is the counters this module needs: when the
monitor first started and how many times it fired (``Progress``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler import durations
from reconciler.findings import Finding
from reconciler.model import Monitor

KEYS = ("until", "stopAfter", "stopWhen")
"""The top-level fields (the writer's order)."""


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """A monitor's end conditions (``normalize``); None fields are unset.

    Attributes:
        until_at: Unix seconds of an absolute ``until``.
        until_after: seconds after the first start, for a duration ``until``.
        stop_after: ``stopAfter.fires``.
        stop_when: the ``stopWhen`` regex.
    """

    until_at: float | None = None
    until_after: float | None = None
    stop_after: int | None = None
    stop_when: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the running registry's copy, the completion record's
        key): ``{"untilAt", "untilAfter", "stopAfter", "stopWhen"}``."""
        return {"untilAt": self.until_at, "untilAfter": self.until_after,
                "stopAfter": self.stop_after, "stopWhen": self.stop_when}


@dataclass(frozen=True, slots=True)
class Progress:
    """What the engine recorded: Unix seconds of the first start, fires so far."""

    started_at: float
    fires: int = 0


def key(monitor: Monitor) -> str:
    """``<fingerprint>:<digest of the end conditions>``: a completion holds while this is
    unchanged (an edit of the fingerprint or of ``until``/``stopAfter``/``stopWhen``
    restarts the monitor's life)."""
    import hashlib
    import json

    spec = monitor.lifecycle.to_json() if monitor.lifecycle is not None else None
    body = json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()
    return f"{monitor.fingerprint}:{hashlib.sha256(body).hexdigest()[:16]}"


def parse_until(text: str) -> tuple[float | None, float | None]:
    """``(until_at, until_after)`` of an ``until`` value: a date-time with a time zone
    or a date (midnight UTC), else a duration (``durations.parse``).

    Raises:
        ValueError: neither (one line saying what is accepted).
    """
    text = text.strip()
    try:
        if len(text) == 10 and text[4] == "-":
            moment = dt.datetime.combine(dt.date.fromisoformat(text), dt.time(0, 0),
                                         tzinfo=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text)
    except ValueError:
        try:
            return None, durations.parse(text)
        except ValueError:
            raise ValueError(f"{text!r} is neither an ISO-8601 date-time with a time zone "
                             f"nor a duration (3d, 12h)") from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r}: a date-time needs a time zone (e.g. 2026-12-01T09:00:00Z)")
    return durations.check_time(moment, text).timestamp(), None


def normalize(doc: Mapping[str, Any]) -> Lifecycle | None:
    """The ``Lifecycle`` of a schema-valid monitor document, None when it sets none of
    ``KEYS``.

    Raises:
        ValueError: ``until`` does not parse (lint reports it first).
    """
    if not any(k in doc for k in KEYS):
        return None
    until_at = until_after = None
    if isinstance(doc.get("until"), str):
        until_at, until_after = parse_until(doc["until"])
    stop = doc.get("stopAfter")
    return Lifecycle(until_at, until_after,
                     int(stop["fires"]) if isinstance(stop, Mapping) else None,
                     doc.get("stopWhen"))


def from_json(data: Mapping[str, Any] | None) -> Lifecycle | None:
    """The inverse of ``Lifecycle.to_json`` (None stays None)."""
    if not data:
        return None
    return Lifecycle(data.get("untilAt"), data.get("untilAfter"), data.get("stopAfter"),
                     data.get("stopWhen"))


def check(doc: Mapping[str, Any]) -> list[Finding]:
    """Lint's findings: ``until`` parses (``bad-until``), ``stopWhen`` compiles
    (``bad-regex``)."""
    out: list[Finding] = []
    until = doc.get("until")
    if isinstance(until, str):
        try:
            parse_until(until)
        except ValueError as e:
            out.append(Finding(("until",), str(e), "bad-until"))
    when = doc.get("stopWhen")
    if isinstance(when, str):
        try:
            re.compile(when)
        except re.error as e:
            out.append(Finding(("stopWhen",), f"invalid regex {when!r}: {e.msg}", "bad-regex"))
    return out


def describe(spec: Lifecycle) -> str:
    """``until 2026-12-01T00:00:00Z, stopAfter 3 fires, stopWhen /merged|closed/``."""
    parts = []
    if spec.until_at is not None:
        parts.append("until " + dt.datetime.fromtimestamp(spec.until_at, dt.UTC)
                     .strftime("%Y-%m-%dT%H:%M:%SZ"))
    if spec.until_after is not None:
        parts.append(f"until {durations.format(spec.until_after)} after the first start")
    if spec.stop_after is not None:
        parts.append(f"stopAfter {spec.stop_after} fire{'s' if spec.stop_after != 1 else ''}")
    if spec.stop_when is not None:
        parts.append(f"stopWhen /{spec.stop_when}/")
    return ", ".join(parts)


def outcome(spec: Lifecycle, progress: Progress, *, now: float,
            observation: str | None = None) -> str | None:
    """Why the monitor is completed now, or None (see the module docstring)::

        "stopWhen matched 'merged'", "stopAfter: 3 fires", "until 2026-12-01T00:00:00Z"
    """
    if spec.stop_when is not None and observation is not None:
        m = re.search(spec.stop_when, observation)
        if m is not None:
            return f"stopWhen matched {m.group(0)[:80]!r}"
    if spec.stop_after is not None and progress.fires >= spec.stop_after:
        return f"stopAfter: {progress.fires} fire{'s' if progress.fires != 1 else ''}"
    deadline = spec.until_at
    if deadline is None and spec.until_after is not None:
        deadline = progress.started_at + spec.until_after
    if deadline is not None and now >= deadline:
        return "until " + dt.datetime.fromtimestamp(deadline, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    return None
