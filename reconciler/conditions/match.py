"""``match``: fire once per distinct signature while the regex matches. Pure.

Fires when the observation matches ``condition.match``, once per distinct signature
while it keeps matching (``matched new signature``; ``unchanged`` while the signature
repeats); a non-matching observation ends the episode (``no match``), so fail, pass,
fail fires twice. A match on the very first observation fires (a watch armed while CI
is already red wakes you).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reconciler.addflags import AddFlag
from reconciler.conditions import signature
from reconciler.conditions.decision import Decision, Reason
from reconciler.conditions.spec import Condition, regex_flag
from reconciler.findings import Finding
from reconciler.model import ConditionMode, Monitor, Observation, Severity

MODE = ConditionMode.MATCH

SUCCESS_TOKENS = frozenset(
    {"issued", "success", "succeeded", "successful", "passed", "pass", "ok", "green",
     "merged", "ready", "done", "complete", "completed"}
)
"""Words that only say "it worked": a ``match`` made of these alone is a coverage warning."""

_WORDS = re.compile(r"[a-z]+")

QUIET = "no match yet"
"""The liveness text's tail while the monitor has never fired (``list``, ``view``)."""

ADD = AddFlag("--match", "RE", "Fire when the observation matches RE.")
"""The ``monitors add`` flag (``registry.add_flags``)."""

def describe(spec: Condition) -> str:
    """``match /fail/`` (list/view/plan)."""
    return f"match /{spec.match}/"


def success_only(pattern: str) -> bool:
    """True when every word of ``pattern`` is a success token (``issued``, ``ok|passed``)."""
    words = _WORDS.findall(pattern.lower())
    return bool(words) and all(w in SUCCESS_TOKENS for w in words)


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """The ``coverage`` warning: a ``match`` naming only success tokens never fires when
    the source breaks (silence is not success)."""
    pattern = raw.get("match")
    if not isinstance(pattern, str) or not success_only(pattern):
        return []
    return [Finding(("condition", "match"),
                    f"match {pattern!r} names only a success token: silence is not success, "
                    f"so a broken source never fires; also match the failure (e.g. "
                    f"'{pattern}|fail|error') or add a monitor for it", "coverage",
                    Severity.WARNING)]


def from_flag(value: str) -> dict[str, Any]:
    """The ``condition`` ``monitors add --match RE`` writes.

    Raises:
        errors.UsageError: RE does not compile.
    """
    return {"mode": MODE.value, "match": regex_flag(value, ADD.flag)}


def decide(
    monitor: Monitor, observation: Observation, previous: Mapping[str, Any] | None
) -> Decision:
    """See the module docstring and ``reconciler.conditions.decide``.

    Raises:
        re.error: the ``match`` regex does not compile.
    """
    cond = monitor.condition
    text, dedupe, _key, sig = signature.prepare(cond, observation.text)
    base = {"fingerprint": monitor.fingerprint, "mode": MODE.value}
    prev = dict(previous) if previous is not None else {}
    m = signature.compiled(cond.match or "").search(text)
    if m is None:
        summary = signature.shorten(text)
        state = {**prev, **base, "matching": False}
        return Decision(False, sig, summary, Reason.NO_MATCH, state, (), text,
                        persist=bool(prev.get("matching")))
    summary = signature.shorten(m.group(0))
    groups = tuple(m.groups())
    same, legacy = signature.seen(prev.get("lastSignature"), sig, text, dedupe)
    if prev.get("matching") and same:
        state = {**prev, "lastSignature": sig} if legacy else prev
        return Decision(False, sig, summary, Reason.UNCHANGED, state, groups, text,
                        persist=legacy)
    state = {**prev, **base, "matching": True, "lastSignature": sig}
    return Decision(True, sig, summary, Reason.MATCHED, state, groups, text, persist=True)
