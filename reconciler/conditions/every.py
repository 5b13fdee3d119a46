"""``every``: fire on every observation (pair it with a rate limit). Pure."""

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
    state = {**(previous or {}), "fingerprint": monitor.fingerprint, "mode": "every",
             "lastSignature": sig}
    return Decision(True, sig, summary, Reason.EVERY, state, (), text, persist=True)
