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

Apprise is imported only here and only when called: importing it and loading its
plugins (all ~190 of them, on first use) takes about 0.3 s, more than linting 1,000
monitor files. So lint without channels never loads it, and ``url_problems`` keeps
its answers in ``$XDG_CACHE_HOME/monitors/channel-urls.json`` (default
``~/.cache``), keyed by a sha256 of each URL as written (no URL or secret is stored)
and tied to the installed Apprise (its ``__init__.py``'s path, size and mtime): an
answer depends only on the URL and the Apprise version, so a later lint of
unchanged channels does not import Apprise. A cache that cannot be read or written
is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
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
    the schema check. Answers come from the cache when it has them (see the module
    docstring); Apprise is imported only for a URL it has not seen."""
    from reconciler.config import problems as P
    from reconciler.config import settings_check

    channels = cfg.toml.get("channels")
    if not isinstance(channels, Mapping):
        return []
    cache = _Cache.load()
    out: list[Problem] = []
    for name, table in channels.items():
        url = table.get("url") if isinstance(table, Mapping) else None
        if not isinstance(url, str) or not url:
            continue
        check = cache.check(url)
        if check is None:
            continue
        at = settings_check.at_field(cfg, f"channels.{name}.url", check.message,
                                     "channel-url", key=False)
        make = P.error if check.severity == "error" else P.info
        out.append(make(at.file, at.line, at.col, at.field, at.message, at.rule))
    cache.save()
    return out


CACHE_VERSION = 1
"""Bump when ``url_problem``'s answers change for the same URL and Apprise."""
CACHE_ENTRIES = 256


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/monitors/channel-urls.json`` (``~/.cache`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "monitors" / "channel-urls.json"


class _Cache:
    """``url_problem`` answers by sha256 of the URL, for one installed Apprise."""

    def __init__(self, key: str, answers: dict[str, Any]) -> None:
        self.key = key
        self.answers = answers
        self.changed = False

    @classmethod
    def load(cls) -> _Cache:
        spec = importlib.util.find_spec("apprise")
        try:
            st = os.stat(spec.origin) if spec is not None and spec.origin else None
        except OSError:
            st = None
        key = (f"{CACHE_VERSION}:{spec.origin if spec else ''}:{st.st_size}:{st.st_mtime_ns}"
               if st is not None else "")
        answers: dict[str, Any] = {}
        try:
            doc = json.loads(cache_path().read_text(encoding="utf-8"))
            if key and isinstance(doc, dict) and doc.get("key") == key and isinstance(
                    doc.get("answers"), dict):
                answers = doc["answers"]
        except (OSError, ValueError):
            pass
        return cls(key, answers)

    def check(self, url: str) -> UrlCheck | None:
        digest = hashlib.sha256(url.encode()).hexdigest()
        if digest in self.answers:
            known = self.answers[digest]
            if known is None:
                return None
            if isinstance(known, dict) and set(known) == {"severity", "message"}:
                return UrlCheck(str(known["severity"]), str(known["message"]))
        found = url_problem(url)
        self.answers[digest] = asdict(found) if found is not None else None
        self.changed = True
        return found

    def save(self) -> None:
        if not self.changed or not self.key:
            return
        path = cache_path()
        keep = dict(list(self.answers.items())[-CACHE_ENTRIES:])
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"key": self.key, "answers": keep}), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)


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
    # in a child process killed at the deadline: an answer that never ends cannot keep
    # this process reading (and growing) or waiting at exit
    from reconciler.actions import apprise_child  # asyncio and subprocess: not for lint

    answer = apprise_child.send(url, TEST_TITLE, TEST_BODY.format(name=spec.name),
                                timeout=spec.timeout)
    if answer is None:
        return Outcome(False, None, (f"no answer within {spec.timeout:g}s",))
    said = [redactor.redact(s) for s in answer.said]
    if not answer.added:
        reason = said[0] if said else "check the scheme"
        raise errors.ActionError(f"{spec.name}: not a valid Apprise URL: {reason}")
    status = next((int(m.group(1)) for s in said for m in [_STATUS.search(s)] if m), None)
    return Outcome(answer.ok, status, tuple(said))
