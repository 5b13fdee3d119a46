"""Conditions: (monitor, observation, previous state) -> a fire decision.

Pure: no I/O, no clock, no randomness; never imports sources, actions, the daemon
or any runtime dependency. ``decide`` is the only entry point. One module per mode
(``on_change``, ``match``, ``every``: describe, check, decide) chosen through
``registry.MODES``; ``spec`` holds the typed ``Condition`` (normalize, to_json),
``decision`` the result values, ``outage`` check errors as observations,
``signature`` the ignore/dedupeKey step every mode shares, ``replay`` the scripted
test runner. Semantics (DESIGN.md §1):

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
* ``fireAfter``, ``resolveAfter`` and ``resolve`` (``match`` only) group checks into
  episodes (``episode``): one fire when an episode opens after enough hits, and with
  ``resolve`` one more (reason ``resolved``) when it closes.
* Each stored state keeps the observation it was stored with (``lastObservation``),
  so a fire knows the previous observation and the diff to it (``diff``); a check
  short of a threshold (``pending``, ``pending resolve``) keeps the one before it, so
  an episode's fire diffs against the last check before the episode began.
* A stored state whose fingerprint differs from the monitor's is carried only when
  the edit left what is observed and how signatures are formed alone (``baseline``);
  otherwise the new identity starts from a fresh baseline.

Check errors reach ``decide`` only as error observations (``outage``: with
``condition.onError: observe``, ``error: <kind>: <message>``); otherwise they cannot
change the baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.conditions import baseline, registry
from reconciler.conditions.spec import Condition
from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    from reconciler.conditions.decision import Decision, Reason

__all__ = ["Condition", "Decision", "Reason", "decide"]

LAST_OBSERVATION = "lastObservation"
"""The condition state's key for the observation it was stored with (``Decision.previous``)."""


def __getattr__(name: str) -> Any:
    """``Decision`` and ``Reason`` load with the first use (lint, which imports this
    package for ``spec``, never decides)."""
    if name in ("Decision", "Reason"):
        from reconciler.conditions import decision

        return getattr(decision, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    fresh = previous is not None and previous.get("fingerprint") != monitor.fingerprint
    if fresh:
        assert previous is not None
        previous = baseline.carried(monitor, previous)
    condition = monitor.condition
    decision = registry.mode_of(condition).decide(monitor, observation, previous)
    if condition.episodes:
        from reconciler.conditions import episode

        decision = episode.decide(condition, decision, previous)
    if fresh and not decision.persist:
        # The stored state belongs to another identity: replace it.
        decision = replace(decision, persist=True)
    if decision.persist:  # never on an unchanged poll: no cost on the hot path
        from reconciler.conditions.decision import OBSERVATION_CHARS, Reason

        last = previous.get(LAST_OBSERVATION) if previous is not None else None
        # a check short of a threshold (pending, pending resolve) keeps the observation
        # from before the episode began (or began to close): the fire diffs against it
        between = decision.reason in (Reason.PENDING, Reason.PENDING_RESOLVE) \
            and isinstance(last, str)
        observes, signs = baseline.keys(monitor)
        state = {**decision.state,
                 LAST_OBSERVATION: last if between else decision.observation[:OBSERVATION_CHARS],
                 baseline.OBSERVES: observes, baseline.SIGNS: signs}
        decision = replace(decision, state=state,
                           previous=last if isinstance(last, str) else None)
    return decision
