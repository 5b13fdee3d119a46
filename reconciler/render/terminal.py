"""Terminal-safe text: the one place untrusted text is made harmless for a screen.

Text that came from a watched command, an endpoint, a file or a path may hold
terminal escape sequences (a title change ``ESC ] 0 ; ... BEL``, an OSC 52 clipboard
write, ``ESC [ 2 J``), a bare carriage return that overwrites what was printed, or a
bidi override that reorders what is read. Human-readable (text) output passes it
through ``escape`` before printing, as ``git`` does for control bytes in paths and
``less`` without ``-R`` does: each such character is shown as an escape, never sent.
``--json`` output needs none of this (``json.dumps`` escapes every control character).

Our own colour (``style.paint``) is added AFTER escaping, so it keeps working.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""C0 controls except TAB and LF, DEL, C1 controls (U+0080-U+009F, among them CSI
U+009B, which some terminals obey like ``ESC [``), and the bidi embedding/override
(U+202A-U+202E) and isolate (U+2066-U+2069) characters of Unicode's UAX #9, the
"Trojan Source" characters (CVE-2021-42574)."""

_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\b": "\\b", "\f": "\\f", "\v": "\\v", "\0": "\\0"}


def _shown(m: re.Match[str]) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every unsafe character (``_UNSAFE``) written as a visible escape:
    ``\\x1b``, ``\\r``, ``\\x07``, ``\\x9b``, ``\\u202e``; newline and tab kept.

    Args:
        text: any text (str); safe text comes back unchanged (the same object).
    """
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_shown, text)

