"""Conditions: (monitor, observation, previous state) -> a fire decision.

Pure: no I/O, no clock, no randomness. ``decide`` is the only entry point; one
module per mode (``on_change``, ``match``, ``every``) plus ``signature`` (ignore
and dedupeKey). Semantics (DESIGN.md §1):

* ``on-change``: the first observation of an identity is a silent ``baseline``;
  a later observation whose signature differs from the last seen one fires
  (``changed``), an equal one does not (``unchanged``).
* ``match``: fires when the observation matches ``condition.match``, once per
  distinct signature while it keeps matching (``matched new signature``;
  ``unchanged`` while the signature repeats); a non-matching observation ends
  the episode (``no match``), so fail, pass, fail fires twice. A match on the
  very first observation fires (a watch armed while CI is already red wakes you).
* ``every``: fires on every observation (``every``).
* ``condition.ignore`` regexes are removed from the text before anything else;
  ``condition.dedupeKey``'s first match (group 1 when it has groups) is the
  signature, else the whole (ignored) text.
* A stored state whose fingerprint differs from the monitor's is ignored: the new
  identity starts from a fresh baseline and never inherits the old decision.

Check errors never reach ``decide``: they cannot change the baseline.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import Monitor, Observation


class Reason(enum.StrEnum):
    """Why a decision came out as it did."""

    BASELINE = "baseline"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    MATCHED = "matched new signature"
    NO_MATCH = "no match"
    EVERY = "every"


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one observation.

    Attributes:
        fire: the action should run.
        signature: the observation's signature (dedupe key or whole text; texts over
            ``signature.MAX_PLAIN`` characters are ``sha256:<hex>``).
        summary: the event summary (``{{ event }}``), shortened: in ``match`` mode the
            regex's match; otherwise the dedupe key when set, else the observation text.
        reason: see ``Reason``.
        state: the condition state to persist (includes ``fingerprint`` and ``mode``).
        groups: the match regex's groups (empty unless ``match`` mode matched).
        observation: the observation text after ``ignore``.
        persist: ``state`` differs from what is stored in a way that must be written
            (baseline, fire, episode end, identity change).
    """

    fire: bool
    signature: str
    summary: str
    reason: Reason
    state: dict[str, Any]
    groups: tuple[str | None, ...] = ()
    observation: str = ""
    persist: bool = False


def decide(
    monitor: Monitor, observation: Observation, previous: Mapping[str, Any] | None
) -> Decision:
    """Apply ``monitor.condition`` to ``observation`` against ``previous`` state.

    Args:
        monitor: the monitor (its ``condition`` and ``fingerprint``).
        observation: what the source saw.
        previous: the stored ``state.json`` (or None for a fresh start).

    Raises:
        re.error: a regex does not compile (lint refuses such monitors first).
    """
    if previous is not None and previous.get("fingerprint") != monitor.fingerprint:
        previous = None
        fresh = True
    else:
        fresh = False
    mode = monitor.condition.get("mode", "on-change")
    if mode == "match":
        decision = match.decide(monitor, observation, previous)
    elif mode == "every":
        decision = every.decide(monitor, observation, previous)
    else:
        decision = on_change.decide(monitor, observation, previous)
    if fresh and not decision.persist:
        # The stored state belongs to another identity: replace it.
        decision = _with(decision, persist=True)
    return decision


def _with(decision: Decision, **changes: Any) -> Decision:
    from dataclasses import replace

    return replace(decision, **changes)


from reconciler.conditions import every, match, on_change  # noqa: E402  (modes use Decision)
