"""``on-change``: a silent baseline, then fire whenever the signature differs. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.conditions import Decision, Reason, signature
from reconciler.model import Monitor, Observation


def decide(
    monitor: Monitor, observation: Observation, previous: Mapping[str, Any] | None
) -> Decision:
    """See ``reconciler.conditions``."""
    cond = monitor.condition
    text, dedupe, key, sig = signature.prepare(cond, observation.text)
    summary = signature.shorten(key if dedupe else text)
    base = {"fingerprint": monitor.fingerprint, "mode": "on-change"}
    if previous is None:
        state = {**base, "baseline": sig, "lastSignature": sig}
        return Decision(False, sig, summary, Reason.BASELINE, state, (), text, persist=True)
    same, legacy = signature.seen(previous.get("lastSignature"), sig, text, dedupe)
    if same:
        state = {**previous, "lastSignature": sig} if legacy else dict(previous)
        return Decision(False, sig, summary, Reason.UNCHANGED, state, (), text,
                        persist=legacy)
    state = {**previous, **base, "lastSignature": sig}
    return Decision(True, sig, summary, Reason.CHANGED, state, (), text, persist=True)
