"""What a mode's ``decide`` returns: ``Decision`` and its ``Reason``. Pure values, a leaf."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

OBSERVATION_CHARS = 4000
"""Characters of the observation kept in the condition state (``lastObservation``) for
the next event's ``previous`` and diff (as ``events.EXCERPT_CHARS``)."""


class Reason(enum.StrEnum):
    """Why a decision came out as it did."""

    BASELINE = "baseline"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    MATCHED = "matched new signature"
    NO_MATCH = "no match"
    EVERY = "every"
    PENDING = "pending"
    """A hit that does not reach ``fireAfter`` yet (``conditions.episode``)."""
    PENDING_RESOLVE = "pending resolve"
    """A miss in an open episode short of ``resolveAfter``."""
    RESOLVED = "resolved"
    """An episode closed with ``resolve: true``: a fire of kind ``resolved``."""


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
        previous: the observation (after ``ignore``, cut to ``OBSERVATION_CHARS``)
            stored with the last persisted state, set when ``persist``; None when
            there is none (a first observation, a state from an older version).
    """

    fire: bool
    signature: str
    summary: str
    reason: Reason
    state: dict[str, Any]
    groups: tuple[str | None, ...] = ()
    observation: str = ""
    persist: bool = False
    previous: str | None = None
