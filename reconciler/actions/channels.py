"""Notify channels checked before the first alert: URL checks for lint, one test message.

* ``url_problem(url)``: does Apprise accept this channel URL? Apprise parses a URL
  into its plugin without sending anything (``Apprise.instantiate``). A ``${NAME}``
  part stands in as a placeholder (lint never needs the secrets): the URL passes when
  one of a few placeholder values parses (services check token formats). A scheme
  Apprise does not know (``foo://bar``) is an error with a did-you-mean; a URL of a
  known scheme that does not parse is an error when it has no ``${NAME}`` part, and
  an ``info`` (not checked: run ``monitors channels test``) when it has, since the
  placeholders may not fit the service's token format.
* ``url_problems(cfg)``: those checks for every ``[channels.NAME] url`` of
  monitors.toml, as lint problems (rule ``channel-url``) at the URL's position.
* ``send_test(spec, environ=...)``: one message through one channel, one attempt,
  with Apprise's own words and the HTTP status when Apprise reports one
  (``monitors channels test NAME``).

Apprise is imported only here and only when called (it is slow to import and its
plugins load on first use), so lint without channels never loads it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.actions import options
from reconciler.actions.options import ChannelSpec

if TYPE_CHECKING:
    from reconciler.config.problems import Problem
    from reconciler.settings import Settings

PLACEHOLDERS = ("placeholder", "0123456789", "123456789:placeholder")
"""Values a ``${NAME}`` part takes in turn at lint (a word, digits, a bot token)."""

TEST_TITLE = "monitors: channel test"
TEST_BODY = "A test message from `monitors channels test {name}`: this channel works."

_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_STATUS = re.compile(r"(?:error=|\bHTTP |\()([1-5][0-9]{2})\b")


@dataclass(frozen=True, slots=True)
class UrlCheck:
    """What lint says about one channel URL.

    Attributes:
        severity: ``error`` (Apprise refuses it) or ``info`` (not checkable offline).
        message: the reason, in Apprise's words where it gave some.
    """

    severity: str
    message: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of ``send_test``.

    Attributes:
        ok: Apprise reported the message delivered.
        status: the HTTP status Apprise reported (a failure's, usually), or None.
        detail: Apprise's warnings and errors during the attempt, secrets redacted.
    """

    ok: bool
    status: int | None = None
    detail: tuple[str, ...] = field(default_factory=tuple)


@contextmanager
def _apprise_log() -> Iterator[list[str]]:
    """Collect the messages Apprise logs at WARNING and above (logger ``apprise``)."""
    lines: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                lines.append(" ".join(record.getMessage().split()))
            except Exception:  # a plugin's bad format string must not break the check
                lines.append(str(record.msg))

    logger = logging.getLogger("apprise")
    handler = _Keep(logging.WARNING)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if logger.getEffectiveLevel() > logging.WARNING
                    else logger.level)
    logger.propagate = False  # ours to report: no stray lines on stderr
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _parses(url: str) -> bool:
    import apprise

    return apprise.Apprise.instantiate(url, suppress_exceptions=True) is not None


def known_schemes() -> list[str]:
    """Every URL scheme of the installed Apprise (``Apprise().details()``), sorted."""
    import apprise

    found: set[str] = set()
    for service in apprise.Apprise().details().get("schemas", []):
        for key in ("protocols", "secure_protocols"):
            value: Any = service.get(key)
            if isinstance(value, str):
                found.add(value.lower())
            elif isinstance(value, list | tuple):
                found.update(str(v).lower() for v in value)
    return sorted(found)


def url_problem(url: str) -> UrlCheck | None:
    """Check one channel URL without sending (see the module docstring); None when fine."""
    templated = bool(_VAR.search(url))
    with _apprise_log() as said:
        candidates = [_VAR.sub(p, url) for p in PLACEHOLDERS] if templated else [url]
        if any(_parses(c) for c in candidates):
            return None
    scheme = _SCHEME.match(url)
    if scheme is None:
        return UrlCheck("error", "not an Apprise URL: expected SCHEME://..., e.g. "
                                 "ntfy://ntfy.sh/my-topic")
    name = scheme.group(1).lower()
    schemes = known_schemes()
    if name not in schemes:
        from reconciler.config import validate

        return UrlCheck("error", f"unknown Apprise scheme {name!r}"
                                 f"{validate.suggest(name, schemes)}")
    reason = said[0] if said else "Apprise cannot parse it"
    if templated:
        return UrlCheck("info", f"not checked: with its ${{NAME}} parts as placeholders "
                                f"Apprise cannot parse it ({reason}); `monitors channels "
                                f"test` checks it with the real values")
    return UrlCheck("error", f"Apprise cannot parse it: {reason}")


def url_problems(cfg: Settings) -> list[Problem]:
    """``url_problem`` for every ``[channels.NAME] url`` of ``cfg.toml``, as problems
    (rule ``channel-url``) at each URL. Channels whose table is malformed are left to
    the schema check. Imports Apprise only when a channel has a URL."""
    from reconciler.config import problems as P
    from reconciler.config import settings_check

    channels = cfg.toml.get("channels")
    if not isinstance(channels, Mapping):
        return []
    out: list[Problem] = []
    for name, table in channels.items():
        url = table.get("url") if isinstance(table, Mapping) else None
        if not isinstance(url, str) or not url:
            continue
        check = url_problem(url)
        if check is None:
            continue
        at = settings_check.at_field(cfg, f"channels.{name}.url", check.message,
                                     "channel-url", key=False)
        make = P.error if check.severity == "error" else P.info
        out.append(make(at.file, at.line, at.col, at.field, at.message, at.rule))
    return out


def send_test(spec: ChannelSpec, *, environ: Mapping[str, str]) -> Outcome:
    """Send one test message through ``spec`` (one attempt, ``spec.timeout`` seconds).

    Raises:
        errors.ActionError: a ``${NAME}`` of the URL is not set, or the URL is not one
            Apprise accepts (its reason given).
        errors.UsageError: the channel is the built-in ``log`` (nothing to send).
    """
    if spec.url is None:
        raise errors.UsageError(f"{spec.name}: the built-in channel writes to the daemon log "
                                "and <state>/notifications.log; there is nothing to send")
    redactor = options.Redactor()
    url = options.expand(spec.url, environ=environ, redactor=redactor)
    result: dict[str, Any] = {}

    def attempt() -> None:
        import apprise

        with _apprise_log() as said:
            sender = apprise.Apprise()
            try:
                result["added"] = sender.add(url)
                result["ok"] = bool(result["added"]) and bool(sender.notify(
                    body=TEST_BODY.format(name=spec.name), title=TEST_TITLE))
            except Exception as e:  # a plugin bug is this channel's failure
                said.append(f"{type(e).__name__}: {e}")
                result["ok"] = False
        result["said"] = said

    worker = threading.Thread(target=attempt, name="channel-test", daemon=True)
    worker.start()
    worker.join(spec.timeout)
    said = [redactor.redact(s) for s in result.get("said", [])]
    if worker.is_alive():
        return Outcome(False, None, (f"no answer within {spec.timeout:g}s",))
    if not result.get("added", True):
        reason = said[0] if said else "check the scheme"
        raise errors.ActionError(f"{spec.name}: not a valid Apprise URL: {reason}")
    status = next((int(m.group(1)) for s in said for m in [_STATUS.search(s)] if m), None)
    return Outcome(bool(result.get("ok")), status, tuple(said))
