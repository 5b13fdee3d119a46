"""``every``: fire on every observation (pair it with a rate limit). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.addflags import AddFlag
from reconciler.conditions import signature
from reconciler.conditions.decision import Decision, Reason
from reconciler.conditions.spec import Condition
from reconciler.findings import Finding
from reconciler.model import ConditionMode, Monitor, Observation

MODE = ConditionMode.EVERY

QUIET = "not fired yet"
"""The liveness text's tail while the monitor has never fired (``list``, ``view``)."""

ADD = AddFlag("--every", None, "Fire on every observation (pair with a rate limit).")
"""The ``monitors add`` flag (``registry.add_flags``)."""

def describe(spec: Condition) -> str:
    """``every`` (list/view/plan)."""
    return MODE.value


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """No checks beyond the regexes every mode shares (``spec.check_regexes``)."""
    return []


def from_flag(value: object) -> dict[str, Any]:
    """The ``condition`` ``monitors add --every`` writes."""
    return {"mode": MODE.value}


def decide(
    monitor: Monitor, observation: Observation, previous: Mapping[str, Any] | None
) -> Decision:
    """Fire (reason ``every``) and record the signature. See ``reconciler.conditions``."""
    text, dedupe, key, sig = signature.prepare(monitor.condition, observation.text)
    summary = signature.shorten(key if dedupe else text)
    state = {**(previous or {}), "fingerprint": monitor.fingerprint, "mode": MODE.value,
             "lastSignature": sig}
    return Decision(True, sig, summary, Reason.EVERY, state, (), text, persist=True)
