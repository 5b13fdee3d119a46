"""Episodes: thresholds and hysteresis over a ``match`` decision. Pure.

Used when a condition sets ``fireAfter``, ``resolveAfter`` or ``resolve``
(``Condition.episodes``), the way Prometheus alerting rules pair an expression with
``for:`` and resolve notices (Gatus: ``failure-threshold``/``success-threshold``):

* Each check is a *hit* when the mode's own decision says the observation satisfies
  the condition (``match``: the regex matches), else a *miss*.
* A closed episode **opens** when ``count`` of the last ``within`` checks are hits
  (``fireAfter``; ``{consecutive: N}`` is N of N; default 1 of 1). A window not yet
  full counts the checks there are. Opening fires once (reason ``matched new
  signature``); a hit that does not open it yet is ``pending``.
* An open episode **closes** after ``resolveAfter.consecutive`` misses in a row
  (default 1). With ``resolve: true`` closing fires again (reason ``resolved``; the
  event's ``kind`` is ``resolved`` and its signature the one the episode opened
  with); without it closing is silent (``no match``). While open nothing fires: one
  episode, one notice (hits are ``unchanged``, misses short of the count ``pending
  resolve``). Closing empties the window.

The episode lives in the condition state under ``"episode"``::

    {"window": "1101", "open": false, "misses": 0, "signature": "..."}

``window`` holds the last ``within`` checks oldest first (``1`` hit, ``0`` miss)
with leading misses dropped (they can no longer count), so a healthy monitor's
state never changes and is never rewritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from reconciler.conditions.decision import Decision, Reason
from reconciler.conditions.spec import Condition

KEY = "episode"
"""The condition state's key for the episode."""

_HITS = frozenset({Reason.MATCHED, Reason.UNCHANGED})


def decide(condition: Condition, inner: Decision,
           previous: Mapping[str, Any] | None) -> Decision:
    """The episode's decision around the mode's decision ``inner`` (see the module
    docstring). ``previous`` is the stored condition state (None for a fresh start);
    the returned ``state`` is ``inner.state`` with the episode under ``KEY``."""
    count, within = condition.fire_after or (1, 1)
    stored = (previous or {}).get(KEY)
    if stored is None and previous is not None and previous.get("matching"):
        # a state from before thresholds were set (an edit that kept the baseline):
        # a failure being matched is an open episode, not a new one
        stored = {"open": True, "signature": previous.get("lastSignature")}
    before = {**_CLOSED, **(stored or {})}
    is_open, window, misses = bool(before["open"]), str(before["window"]), int(before["misses"])
    opened_with = before.get("signature")
    hit = inner.reason in _HITS
    fire, reason = False, inner.reason
    if not is_open:
        window = (window + ("1" if hit else "0"))[-within:].lstrip("0")
        if hit and window.count("1") >= count:
            is_open, fire, reason, window = True, True, Reason.MATCHED, ""
            opened_with = inner.signature
        elif hit:
            reason = Reason.PENDING
    elif hit:
        misses, reason = 0, Reason.UNCHANGED
    elif misses + 1 >= (condition.resolve_after or 1):
        is_open, misses, window = False, 0, ""
        fire = condition.resolve
        reason = Reason.RESOLVED if fire else Reason.NO_MATCH
    else:
        misses, reason = misses + 1, Reason.PENDING_RESOLVE
    episode: dict[str, Any] = {"window": window, "open": is_open, "misses": misses}
    if is_open and opened_with is not None:
        episode["signature"] = opened_with
    signature = inner.signature
    if reason is Reason.RESOLVED and opened_with is not None:
        signature = str(opened_with)
    return replace(inner, fire=fire, reason=reason, state={**inner.state, KEY: episode},
                   signature=signature, persist=inner.persist or episode != before)


_CLOSED: Mapping[str, Any] = {"window": "", "open": False, "misses": 0}
"""The episode of a monitor that has seen no hit."""
