"""Check errors as observations (``condition.onError``). Pure, a leaf of the package.

With ``onError: observe`` a failed check becomes the observation
``error: <kind>: <message>`` that the condition decides like any other, so an outage
is an event (as in Gatus, Uptime Kuma or urlwatch) and the first good check after it
is a change again. Two promises make that usable:

* **A stable kind.** The sources' own error kinds are mapped onto ``KINDS``
  (``protocol`` -> ``http``, ``unreadable`` -> ``read``, ``exited`` -> ``exit``, ...).
  Kinds that are not an outage of the watched thing (``config``, ``state``,
  ``internal``, ``unsupported``) and permanent errors (they park the monitor) stay
  plain check errors whatever ``onError`` says.
* **One signature per outage.** The message loses its volatile parts (fractional
  timings, ephemeral ports after an IP address, object addresses, pids) and is cut
  to ``MESSAGE_CHARS``, so a lasting outage repeats one signature and fires once.

``ignore`` keeps today's behaviour: check errors never reach the condition. Drought
notices (``actions.guards``) count failed checks either way.
"""

from __future__ import annotations

import re

from reconciler.model import Observation

OBSERVE = "observe"
IGNORE = "ignore"
ON_ERROR = (OBSERVE, IGNORE)
"""The ``condition.onError`` values."""

KINDS = ("timeout", "connect", "dns", "tls", "http", "spawn", "exit", "read", "select")
"""The stable kinds of an error observation (README "Check errors as observations")."""

_KIND_OF: dict[str, str] = {
    **{k: k for k in KINDS},
    "protocol": "http", "url": "http",
    "exited": "exit", "dead": "exit",
    "unreadable": "read", "line-too-long": "read",
}
"""A source's ``SourceError.kind`` -> its stable kind; kinds not listed are not observed."""

MESSAGE_CHARS = 300
"""Longest message kept in an error observation (characters, after stripping)."""

PREFIX = "error: "
"""Every error observation's text starts with this (``is_error``)."""

_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "0x?"),                       # object addresses
    (re.compile(r"\b\d+\.\d+\s?(?:ms|s|seconds?)\b"), "?s"),             # measured timings
    # ip:port, except a URL's own (after //: configured, so stable)
    (re.compile(r"(?<![\w./])((?:\d{1,3}\.){3}\d{1,3}|\[[0-9a-fA-F:.]+\]):\d{1,5}\b"), r"\1:?"),
    (re.compile(r"(\('[^']*', )\d{1,5}(\)|, )"), r"\1?\2"),             # ('host', port)
    (re.compile(r"\b(pid|port) \d+\b"), r"\1 ?"),
)


def stable_kind(kind: str) -> str | None:
    """The stable kind (``KINDS``) of a source error kind, or None when errors of that
    kind are never observations (configuration, state, internal failures)."""
    return _KIND_OF.get(kind)


def stable_message(message: str) -> str:
    """``message`` without volatile parts, on one line, at most ``MESSAGE_CHARS``::

        "GET http://h/: ConnectError: connect to ('10.0.0.1', 41234) after 0.31s"
        -> "GET http://h/: ConnectError: connect to ('10.0.0.1', ?) after ?s"
    """
    text = " ".join(message.split())
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def observation(on_error: str, kind: str, message: str, *,
                permanent: bool = False) -> Observation | None:
    """The error observation of a failed check, or None when it stays a check error.

    Args:
        on_error: the monitor's effective ``onError`` (``OBSERVE`` or ``IGNORE``).
        kind: the source's error kind (``errors.SourceError.kind``).
        message: the error's message without the kind (already redacted).
        permanent: the error parks the monitor (never observed).

    Returns:
        ``Observation("error: <kind>: <message>", {"error": <kind>})`` or None.
    """
    if on_error != OBSERVE or permanent:
        return None
    stable = _KIND_OF.get(kind)
    if stable is None:
        return None
    return Observation(f"{PREFIX}{stable}: {stable_message(message)}", {"error": stable})


def parse_step(text: str) -> Observation:
    """The error observation of a replay step's ``error:`` value (``kind: message``, or
    a bare message, kind ``read``): the form the engine produces, so a replay file
    can script outages. An unknown kind is kept as given."""
    kind, sep, message = text.partition(":")
    kind = kind.strip()
    if not sep or not re.fullmatch(r"[a-z][a-z-]*", kind):
        kind, message = "read", text
    stable = _KIND_OF.get(kind, kind)
    return Observation(f"{PREFIX}{stable}: {stable_message(message.strip())}",
                       {"error": stable})


def is_error(observation_text: str) -> bool:
    """True when the text is an error observation's (``PREFIX``)."""
    return observation_text.startswith(PREFIX)
