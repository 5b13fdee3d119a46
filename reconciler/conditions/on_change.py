"""``on-change``: a silent baseline, then fire whenever the signature differs. Pure.

The default mode. The first observation of an identity is a silent ``baseline``; a
later observation whose signature differs from the last seen one fires (``changed``),
an equal one does not (``unchanged``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from reconciler.addflags import AddFlag
from reconciler.conditions import signature
from reconciler.conditions.decision import Decision, Reason
from reconciler.conditions.spec import Condition
from reconciler.findings import Finding
from reconciler.model import ConditionMode, Monitor, Observation

MODE = ConditionMode.ON_CHANGE

QUIET = "no change yet"
"""The liveness text's tail while the monitor has never fired (``list``, ``view``)."""

ADD = AddFlag("--on-change", None, "Fire when the observation changes (default).")
"""The ``monitors add`` flag (``registry.add_flags``)."""

def describe(spec: Condition) -> str:
    """``on-change`` (list/view/plan)."""
    return MODE.value


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """No checks beyond the regexes every mode shares (``spec.check_regexes``)."""
    return []


def from_flag(value: object) -> dict[str, Any]:
    """The ``condition`` ``monitors add --on-change`` writes (``registry.from_flags``
    leaves the mode implicit where it is the default)."""
    return {"mode": MODE.value}


def decide(
    monitor: Monitor, observation: Observation, previous: Mapping[str, Any] | None
) -> Decision:
    """See the module docstring and ``reconciler.conditions.decide``."""
    text, dedupe, key, sig = signature.prepare(monitor.condition, observation.text)
    summary = signature.shorten(key if dedupe else text)
    if previous is None:
        state = {"fingerprint": monitor.fingerprint, "mode": MODE.value, "baseline": sig,
                 "lastSignature": sig}
        return Decision(False, sig, summary, Reason.BASELINE, state, (), text, persist=True)
    same, legacy = signature.seen(previous.get("lastSignature"), sig, text, dedupe)
    if same:
        # Unchanged (every tick of a quiet monitor): the stored state as it is, no copy
        # (a Decision's state is read, never changed in place).
        state = {**previous, "lastSignature": sig} if legacy else cast(dict[str, Any], previous)
        return Decision(False, sig, summary, Reason.UNCHANGED, state, (), text,
                        persist=legacy)
    state = {**previous, "fingerprint": monitor.fingerprint, "mode": MODE.value,
             "lastSignature": sig}
    return Decision(True, sig, summary, Reason.CHANGED, state, (), text, persist=True)
