"""Signatures: ``ignore`` removal, the ``dedupeKey`` and the summary. Pure."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

from reconciler.conditions.spec import Condition

MAX_PLAIN = 256
"""Signatures longer than this many characters are stored as ``sha256:<hex>``."""

SUMMARY_CHARS = 1000


@functools.lru_cache(maxsize=8192)
def compiled(pattern: str) -> re.Pattern[str]:
    """``re.compile`` with a cache sized for thousands of monitors.

    Raises:
        re.error: the pattern does not compile.
    """
    return re.compile(pattern)


def apply_ignore(text: str, patterns: Sequence[str]) -> str:
    """``text`` with every match of each ``patterns`` regex removed, in order."""
    for pattern in patterns:
        text = compiled(pattern).sub("", text)
    return text


def raw_key(text: str, dedupe: str | None) -> str:
    """The dedupe key of ``text`` as matched: the first match of ``dedupe`` (group 1
    when the regex has groups), or the whole text when ``dedupe`` is unset or does not
    match."""
    if dedupe:
        m = compiled(dedupe).search(text)
        if m is not None:
            return (m.group(1) or "") if m.re.groups else m.group(0)
    return text


def key(text: str, dedupe: str | None) -> str:
    """The dedupe key of ``text`` (``raw_key``) without surrounding whitespace.

    The summary (``{{ event }}``) is stripped too (``shorten``), so a command's
    trailing newline is part of neither: the webhook body's ``signature`` and
    ``event`` agree, and output differing only in leading or trailing whitespace
    is the same signature."""
    return raw_key(text, dedupe).strip()


def seen(stored: object, sig: str, text: str, dedupe: str | None) -> tuple[bool, bool]:
    """Whether ``stored`` (a state's ``lastSignature``) is the signature ``sig`` of
    ``text``, and whether it is so only in the pre-strip form (``raw_key``) that
    earlier versions stored (then the state should be rewritten, without a fire:
    upgrading must not make every monitor fire once).

    Returns:
        (same, legacy).
    """
    if stored == sig:
        return True, False
    if isinstance(stored, str) and stored == of(raw_key(text, dedupe)):
        return True, True
    return False, False


def of(key_text: str) -> str:
    """The stored signature of a key: the key itself when short, else ``sha256:<hex>``."""
    if len(key_text) <= MAX_PLAIN:
        return key_text
    return "sha256:" + hashlib.sha256(key_text.encode("utf-8", "surrogatepass")).hexdigest()


def shorten(text: str, limit: int = SUMMARY_CHARS) -> str:
    """``text`` stripped and cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prepare(condition: Condition, observed: str) -> tuple[str, str | None, str, str]:
    """The first step every condition mode shares.

    Returns:
        ``(text, dedupe, key, sig)``: the observation after ``condition.ignore``, the
        ``dedupeKey`` regex (or None), the key it selects (``key``) and its signature
        (``of``).
    """
    text = apply_ignore(observed, condition.ignore)
    dedupe = condition.dedupe_key
    k = key(text, dedupe)
    return text, dedupe, k, of(k)
