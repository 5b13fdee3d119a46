"""``match``: fire once per distinct signature while the regex matches. Pure."""

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
    text, dedupe, _key, sig = signature.prepare(cond, observation.text)
    base = {"fingerprint": monitor.fingerprint, "mode": "match"}
    prev = dict(previous) if previous is not None else {}
    m = signature.compiled(str(cond.get("match") or "")).search(text)
    if m is None:
        summary = signature.shorten(text)
        if prev.get("matching"):
            state = {**prev, **base, "matching": False}
            return Decision(False, sig, summary, Reason.NO_MATCH, state, (), text, persist=True)
        state = {**prev, **base, "matching": False}
        return Decision(False, sig, summary, Reason.NO_MATCH, state, (), text)
    summary = signature.shorten(m.group(0))
    groups = tuple(m.groups())
    same, legacy = signature.seen(prev.get("lastSignature"), sig, text, dedupe)
    if prev.get("matching") and same:
        state = {**prev, "lastSignature": sig} if legacy else prev
        return Decision(False, sig, summary, Reason.UNCHANGED, state, groups, text,
                        persist=legacy)
    state = {**prev, **base, "matching": True, "lastSignature": sig}
    return Decision(True, sig, summary, Reason.MATCHED, state, groups, text, persist=True)
