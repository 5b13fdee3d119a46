"""Baselines follow what is observed, not the whole fingerprint. Pure.

A monitor's fingerprint covers its source, condition and action, so any edit replaces
it; whether the replacement keeps the stored condition state (its baseline and the
signatures already fired) depends on what the edit touched:

* **Kept**: only when or how long to look (``interval``, ``timeout``, ``backoff``),
  the action, or how decisions are tuned (``onError``, ``fireAfter``,
  ``resolveAfter``, ``resolve``) changed. (Rate limit, labels and placement are not in
  the fingerprint: an update in place keeps everything anyway.)
* **New baseline**: what is observed changed (any other source field: command, url,
  path, headers, select, ...), or ``ignore``; or how a signature is formed (``mode``,
  ``match``, ``dedupeKey``) changed, except that in ``match`` mode the state is carried
  when only ``match`` or ``dedupeKey`` changed, so a failure still present keeps the
  signature it fired with and an edit does not repeat its alert.

The condition state records two digests (``keys``): ``observes`` and ``signs``. A
state stored under another fingerprint is carried (``carried``) only when they say
so; a state from before the digests existed starts a new baseline, as it always did.
``verdict`` says the same from two monitors, for the plan and the daemon log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.conditions import spec as condition_spec
from reconciler.model import ConditionMode, Monitor

SCHEDULE_KEYS = frozenset({"interval", "timeout", "backoff"})
"""Source fields that say when and how long to look, never what is seen."""

SIGNATURE_KEYS = ("mode", "match", "dedupeKey")
"""Condition fields that form the signature."""

OBSERVES, SIGNS = "observes", "signs"
"""The condition state's keys for the two digests."""

_CACHE: dict[str, tuple[str, str]] = {}
_CACHE_SIZE = 8192


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a replacement keeps the baseline, and why (one line)."""

    kept: bool
    why: str


def _digest(value: Any) -> str:
    body = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _observed(monitor: Monitor) -> dict[str, Any]:
    source = {k: v for k, v in monitor.source.to_json().items() if k not in SCHEDULE_KEYS}
    return {"source": source, "ignore": list(monitor.condition.ignore)}


def _signing(monitor: Monitor) -> dict[str, Any]:
    cond = condition_spec.to_json(monitor.condition)
    return {k: cond[k] for k in SIGNATURE_KEYS}


def keys(monitor: Monitor) -> tuple[str, str]:
    """``(observes, signs)``: short digests of what ``monitor`` observes and of how it
    forms a signature (cached by fingerprint, which determines both)."""
    found = _CACHE.get(monitor.fingerprint)
    if found is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        found = _CACHE[monitor.fingerprint] = (_digest(_observed(monitor)),
                                               _digest(_signing(monitor)))
    return found


def _episode_carries(old_mode: object, new: Monitor) -> bool:
    return old_mode == ConditionMode.MATCH.value and new.condition.mode is ConditionMode.MATCH


def carried(monitor: Monitor, previous: Mapping[str, Any]) -> dict[str, Any] | None:
    """``previous`` (stored under another fingerprint) as ``monitor``'s state when the
    edit keeps the baseline (see the module docstring), else None (a new baseline)."""
    observes, signs = keys(monitor)
    if previous.get(OBSERVES) != observes:
        return None
    if previous.get(SIGNS) != signs and not _episode_carries(previous.get("mode"), monitor):
        return None
    return {**previous, "fingerprint": monitor.fingerprint, OBSERVES: observes, SIGNS: signs}


def verdict(old: Monitor, new: Monitor) -> Verdict:
    """Whether replacing ``old`` by ``new`` keeps the baseline, with the fields that
    decide it: ``baseline kept (source.interval changed)``, ``new baseline
    (source.command changed)``, ``new baseline (condition.match changed; the signatures
    fired in the current episode are kept)``."""
    observed = _changed("source", _observed(old)["source"], _observed(new)["source"])
    if old.condition.ignore != new.condition.ignore:
        observed.append("condition.ignore")
    if observed:
        return Verdict(False, f"new baseline ({', '.join(observed)} changed: what is observed)")
    signing = _changed("condition", _signing(old), _signing(new))
    if signing:
        what = ", ".join(signing)
        if _episode_carries(old.condition.mode.value, new):
            return Verdict(False, f"new baseline ({what} changed; the signatures fired in "
                                  f"the current episode are kept)")
        return Verdict(False, f"new baseline ({what} changed: how a signature is formed)")
    other = _changed("source", old.source.to_json(), new.source.to_json())
    other += _changed("condition", condition_spec.to_json(old.condition),
                      condition_spec.to_json(new.condition))
    if old.action.to_json() != new.action.to_json():
        other.append("action")
    return Verdict(True, f"baseline kept ({', '.join(other) or 'nothing observed'} changed)")


def _changed(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [f"{prefix}.{k}" for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
