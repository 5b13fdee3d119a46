"""The condition spec: one frozen value shared by every mode. Pure, a leaf of the package.

Every mode has the same fields (``mode``, ``match``, ``dedupeKey``, ``ignore``) and
the normalized mapping the fingerprint hashes carries all four whatever the mode, so
one spec class with the mode as a field says it once; what differs between modes
(description, checks, decide) lives in the mode's module (``registry``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler import errors
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import ConditionMode

DEFAULT_MODE = ConditionMode.ON_CHANGE
"""The mode of a monitor that gives none (or no ``condition`` at all)."""

PID_EXIT_MATCH = "^exited$"
"""A ``pid`` source's default condition matches this (it fires when the process exits)."""

_BY_VALUE = {m.value: m for m in ConditionMode}  # faster than ConditionMode(value)

KEYS = ("mode", "match", "dedupeKey", "ignore", "onError", "fireAfter", "resolveAfter",
        "resolve")
"""The normalized keys in their written order (``to_json``, the YAML writer)."""

OPTIONAL_KEYS = ("onError", "fireAfter", "resolveAfter", "resolve")
"""Keys ``to_json`` writes only when set, so that monitors which do not use them keep
the fingerprint they had before the keys existed (no new baseline on upgrade)."""


@dataclass(frozen=True, slots=True)
class Condition:
    """A normalized ``condition`` (README "Conditions").

    Attributes:
        mode: which mode decides (``registry.MODES``).
        match: the ``match`` regex (``re`` syntax), or None.
        dedupe_key: the ``dedupeKey`` regex whose first match (group 1 when it has
            groups) is the signature, or None for the whole text.
        ignore: regexes removed from the observation, in order, before anything else.
        on_error: ``observe`` or ``ignore`` (``outage.ON_ERROR``): whether a check
            error becomes the observation ``error: <kind>: <message>``; None for the
            source type's default (``sources.registry.on_error``; ``config.normalize``
            stores None when the value written equals that default).
        fire_after: ``(count, within)``: an episode opens when ``count`` of the last
            ``within`` checks satisfy the condition (``fireAfter``; ``{consecutive: N}``
            is ``(N, N)``); None: at the first one.
        resolve_after: consecutive checks that do not satisfy the condition before an
            open episode closes (``resolveAfter.consecutive``); None: 1.
        resolve: fire again, with ``kind: resolved``, when an episode closes.
    """

    mode: ConditionMode = DEFAULT_MODE
    match: str | None = None
    dedupe_key: str | None = None
    ignore: tuple[str, ...] = ()
    on_error: str | None = None
    fire_after: tuple[int, int] | None = None
    resolve_after: int | None = None
    resolve: bool = False

    @property
    def episodes(self) -> bool:
        """True when decisions go through episodes (``conditions.episode``): a
        threshold or a resolve notice is configured."""
        return self.fire_after is not None or self.resolve_after is not None or self.resolve


DEDUPE_KEY = AddFlag("--dedupe-key", "RE", "The first match of RE is the event signature.")
"""The ``add`` flag of ``dedupeKey``, the field every mode shares."""


def regex_flag(value: str, flag: str) -> str:
    """``value`` when it compiles as a Python ``re`` regex (an ``add`` flag's value).

    Raises:
        errors.UsageError: naming ``flag``, e.g. ``--match: invalid regex '(': ...``.
    """
    try:
        re.compile(value)
    except re.error as e:
        raise errors.UsageError(f"{flag}: invalid regex {value!r}: {e}") from None
    return value


def normalize(raw: Mapping[str, Any] | None, *, source_type: str) -> Condition:
    """The ``Condition`` of a schema-valid ``condition`` mapping (None when absent).

    A missing condition defaults to ``on-change``, except for a ``pid`` source, whose
    default condition fires on exit (``match: ^exited$``).

    Raises:
        ValueError: ``mode`` is not a known mode (the schema refuses it first).
    """
    if raw is None and source_type == "pid":
        raw = {"mode": ConditionMode.MATCH.value, "match": PID_EXIT_MATCH}
    raw = raw or {}
    mode = raw.get("mode", DEFAULT_MODE.value)
    if not isinstance(mode, str) or mode not in _BY_VALUE:
        raise ValueError(f"unknown condition mode {mode!r}")
    return Condition(
        mode=_BY_VALUE[mode],
        match=raw.get("match"),
        dedupe_key=raw.get("dedupeKey"),
        ignore=tuple(raw.get("ignore") or ()),
        on_error=raw.get("onError"),
        fire_after=_fire_after(raw.get("fireAfter")),
        resolve_after=_consecutive(raw.get("resolveAfter")),
        resolve=bool(raw.get("resolve", False)),
    )


def _fire_after(raw: Any) -> tuple[int, int] | None:
    """``(count, within)`` of a schema-valid ``fireAfter`` mapping (None when absent)."""
    if not isinstance(raw, Mapping):
        return None
    if "consecutive" in raw:
        n = int(raw["consecutive"])
        return n, n
    return int(raw["count"]), int(raw["within"])


def _consecutive(raw: Any) -> int | None:
    return int(raw["consecutive"]) if isinstance(raw, Mapping) else None


def to_json(spec: Condition) -> dict[str, Any]:
    """The normalized mapping the fingerprint hashes (camelCase keys, ``KEYS`` order)::

        {"mode": "match", "match": "fail", "dedupeKey": None, "ignore": []}

    ``OPTIONAL_KEYS`` appear only when set (``"onError": "observe"``).
    """
    out: dict[str, Any] = {"mode": spec.mode.value, "match": spec.match,
                           "dedupeKey": spec.dedupe_key, "ignore": list(spec.ignore)}
    if spec.on_error is not None:
        out["onError"] = spec.on_error
    if spec.fire_after is not None:
        out["fireAfter"] = {"count": spec.fire_after[0], "within": spec.fire_after[1]}
    if spec.resolve_after is not None:
        out["resolveAfter"] = {"consecutive": spec.resolve_after}
    if spec.resolve:
        out["resolve"] = True
    return out


def check_regexes(raw: Mapping[str, Any]) -> list[Finding]:
    """``bad-regex`` findings for ``match``, ``dedupeKey`` and each ``ignore`` entry of a
    ``condition`` mapping (schema-valid or not: fields of another type are skipped)."""
    out: list[Finding] = []
    for key in ("match", "dedupeKey"):
        if isinstance(raw.get(key), str):
            out.extend(regex(("condition", key), raw[key]))
    ignore = raw.get("ignore")
    for i, pattern in enumerate(ignore if isinstance(ignore, Sequence)
                                and not isinstance(ignore, str) else ()):
        if isinstance(pattern, str):
            out.extend(regex(("condition", "ignore", i), pattern))
    return out


def check_thresholds(raw: Mapping[str, Any]) -> list[Finding]:
    """A ``bad-threshold`` finding when ``fireAfter.count`` exceeds ``fireAfter.within``
    (the episode could never open). The schema refuses thresholds outside ``match``."""
    fire_after = raw.get("fireAfter")
    if not isinstance(fire_after, Mapping):
        return []
    count, within = fire_after.get("count"), fire_after.get("within")
    if isinstance(count, int) and isinstance(within, int) and count > within:
        return [Finding(("condition", "fireAfter", "count"),
                        f"count {count} is larger than within {within}: the episode "
                        f"could never open", "bad-threshold")]
    return []


def regex(path: tuple[str | int, ...], pattern: str) -> list[Finding]:
    """A ``bad-regex`` finding when ``pattern`` does not compile with Python's ``re``."""
    try:
        re.compile(pattern)
    except re.error as e:
        where = f" at position {e.pos}" if e.pos is not None else ""
        return [Finding(path, f"invalid regex {pattern!r}: {e.msg}{where}", "bad-regex")]
    except (RecursionError, OverflowError):
        return [Finding(path, f"invalid regex {pattern[:40]!r}: too complex", "bad-regex")]
    return []
