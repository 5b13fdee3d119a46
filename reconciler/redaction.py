"""Secrets: ``${NAME}`` expansion from the environment, and the one redactor.

A *secret* is the value of an environment variable that the configuration
references where monitors expands ``${NAME}`` (``env``, ``headers`` and ``url``
of a source or action, ``env`` of ``[agents.*]`` and ``[routines.*]``,
``[channels.*] url``) or names as ``secretEnv``. ``collect`` finds them all in
the resolved monitors plus ``monitors.toml``; the daemon registers them with its
``Redactor`` before the first poll and again on every reconcile, and the same
``Redactor`` is shared by sources, the engine, the dispatcher and the daemon log
(``LogFilter``). Text that came from a watched source or a spawned process is
redacted before anything computes a signature from it, stores it or shows it:
every occurrence becomes ``***``.

Rules (README, "Secrets"):

* values shorter than ``MIN_SECRET`` characters (surrounding whitespace not
  counted) are never registered: an empty or one-letter value would shred ordinary
  text; a value with surrounding whitespace is registered both as is and stripped;
* overlapping or nested secrets are masked as one span (the union of every
  occurrence of every secret), so no part of either survives;
* text known to be cut (capped output, a stderr tail) is redacted with
  ``cut=True``: a fragment of at least ``MIN_SECRET`` characters of a secret at
  either edge (its start at the end of the text, its end at the start) is masked
  too, so a cap cannot leave a secret's first half behind.

Pure apart from reading the given environment mapping; thread-safe (``redact``
reads an immutable snapshot, so worker threads may redact while the loop adds).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from reconciler.model import Monitor, Observation

if TYPE_CHECKING:
    import logging

MASK = "***"
MIN_SECRET = 4
"""Characters; shorter values are not redacted (README documents the limit)."""

EXPANDED_KEYS = frozenset({"env", "headers", "url"})
"""Spec keys whose strings (or mapping values) expand ``${NAME}``."""
SECRET_NAME_KEY = "secretEnv"
"""Spec key whose value *names* an environment variable holding a secret."""

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

SHELL_KEY = "command"
"""Spec key whose string form runs through ``/bin/sh -c``: the shell expands its
``${NAME}`` references itself, and each one is registered as a secret too, except the
names in ``NOT_SECRET``."""
NOT_SECRET = frozenset({"HOME", "PATH", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL",
                        "TMPDIR", "TERM", "LANG", "LANGUAGE", "HOSTNAME", "TZ"})
"""Variables of every login environment (POSIX, XDG_*, LC_*) that hold no secret and
would shred ordinary text (paths, user names) if their values were masked."""


class Unset(LookupError):
    """A ``${NAME}`` names an environment variable that is not set (``name``)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"environment variable {name} is not set")
        self.name = name


class Redactor:
    """Replaces registered secret values by ``***`` in text (see the module docstring)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.add_all(secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The registered values, longest first (do not print them)."""
        return self._secrets

    def add(self, value: str) -> None:
        """Treat ``value`` as secret from now on (see ``MIN_SECRET``)."""
        self.add_all((value,))

    def add_all(self, values: Iterable[str]) -> None:
        """Register every one of ``values`` (``add``); the set only ever grows."""
        new = {v for value in values if len(value.strip()) >= MIN_SECRET
               for v in (value, value.strip())}
        if new.issubset(self._secrets):
            return
        with self._lock:
            merged = new.union(self._secrets)
            self._secrets = tuple(sorted(merged, key=lambda s: (-len(s), s)))

    def redact(self, text: str, *, cut: bool = False) -> str:
        """``text`` with every occurrence of every secret replaced by ``***``.

        Args:
            text: any text.
            cut: the text may have been cut at either edge (a cap, a tail): also mask
                an edge fragment of a secret of at least ``MIN_SECRET`` characters.
        """
        secrets = self._secrets
        if not secrets or not text:
            return text
        spans: list[tuple[int, int]] = []
        for s in secrets:
            i = text.find(s)
            while i >= 0:
                spans.append((i, i + len(s)))
                i = text.find(s, i + 1)
            if cut:
                spans.extend(_edge_fragments(text, s))
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        pos = 0  # end of the text already copied or masked
        start, end = spans[0]
        for s_start, s_end in spans[1:]:
            if s_start <= end:  # overlapping or adjacent: one mask
                end = max(end, s_end)
                continue
            out += (text[pos:start], MASK)
            pos, start, end = end, s_start, s_end
        out += (text[pos:start], MASK, text[end:])
        return "".join(out)

    def redact_value(self, value: Any, *, cut: bool = False) -> Any:
        """A JSON-like ``value`` with every string in it (keys too) redacted."""
        if isinstance(value, str):
            return self.redact(value, cut=cut)
        if isinstance(value, Mapping):
            return {self.redact(str(k)): self.redact_value(v, cut=cut) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_value(v, cut=cut) for v in value]
        return value

    def observation(self, observation: Observation) -> Observation:
        """``observation`` with its text and meta redacted (the same object when no
        secret is registered). The text counts as cut when ``meta.truncated`` says so;
        meta strings (a stderr tail) always do."""
        if not self._secrets:
            return observation
        cut = bool(observation.meta.get("truncated"))
        return replace(observation, text=self.redact(observation.text, cut=cut),
                       meta=self.redact_value(observation.meta, cut=True))


def _edge_fragments(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that are a cut piece of ``secret`` at an edge (>= MIN_SECRET)."""
    spans: list[tuple[int, int]] = []
    longest = min(len(secret) - 1, len(text))
    for n in range(longest, MIN_SECRET - 1, -1):
        if text.endswith(secret[:n]):
            spans.append((len(text) - n, len(text)))
            break
    for n in range(longest, MIN_SECRET - 1, -1):
        if text.startswith(secret[-n:]):
            spans.append((0, n))
            break
    return spans


def names(text: str) -> list[str]:
    """The variable names of the ``${NAME}`` references in ``text``, in order."""
    return _VAR.findall(text)


def expand(text: str, *, environ: Mapping[str, str], redactor: Redactor | None = None) -> str:
    """Replace each ``${NAME}`` in ``text`` by the environment variable's value; each
    value substituted is registered with ``redactor``.

    Raises:
        Unset: a referenced variable is not set (the message names it, never a value).
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in environ:
            raise Unset(name)
        value = environ[name]
        if redactor is not None:
            redactor.add(value)
        return value

    return _VAR.sub(sub, text)


def referenced(spec: Any, *, key: str = "") -> set[str]:
    """The environment variable names a spec (a monitor's source or action, or a
    ``monitors.toml`` table) takes secrets from: every ``${NAME}`` in the strings
    under an ``EXPANDED_KEYS`` key, every ``${NAME}`` the shell expands in a string
    ``command`` (less ``NOT_SECRET``), and every ``secretEnv`` value, at any depth."""
    found: set[str] = set()
    if isinstance(spec, Mapping):
        for k, v in spec.items():
            if k == SECRET_NAME_KEY and isinstance(v, str):
                found.add(v)
            else:
                found |= referenced(v, key=key if key in EXPANDED_KEYS else str(k))
    elif isinstance(spec, list | tuple):
        for v in spec:
            found |= referenced(v, key=key)
    elif isinstance(spec, str) and key in EXPANDED_KEYS:
        found.update(names(spec))
    elif isinstance(spec, str) and key == SHELL_KEY:
        found.update(n for n in names(spec) if not _ordinary(n))
    return found


def _ordinary(name: str) -> bool:
    return name in NOT_SECRET or name.startswith(("LC_", "XDG_"))


def collect(monitors: Iterable[Monitor], toml: Mapping[str, Any],
            environ: Mapping[str, str]) -> list[str]:
    """The values of every secret the monitors (source and action) and ``monitors.toml``
    (agents, routines, channels, any section) reference that are set in ``environ``."""
    wanted = referenced(toml)
    for monitor in monitors:
        wanted |= referenced(monitor.source.to_json()) | referenced(monitor.action.to_json())
    return [environ[n] for n in sorted(wanted) if environ.get(n)]


class LogFilter:
    """A handler filter that redacts each record's message, traceback and stack.

    A plain object with ``filter`` (what ``logging.Handler.addFilter`` takes), so this
    leaf does not import ``logging`` for the commands that never log (~2 ms at start)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place (formatting it now); always keeps it."""
        try:
            record.msg = self.redactor.redact(record.getMessage())
            record.args = None
            if record.exc_info:
                import logging

                record.exc_text = logging.Formatter().formatException(record.exc_info)
                record.exc_info = None
            if record.exc_text:
                record.exc_text = self.redactor.redact(record.exc_text)
            if record.stack_info:
                record.stack_info = self.redactor.redact(record.stack_info)
        except Exception:  # a bad format string: let the handler report it as usual
            pass
        return True


def filter_logs(redactor: Redactor, logger: str = "monitors") -> None:
    """Redact everything logging writes in this process with ``redactor``: the handlers
    of ``logger`` (the daemon log), of the root logger and ``logging.lastResort`` (what
    libraries such as asyncio log to stderr, which may quote an exception holding a
    secret). Replaces a ``LogFilter`` installed before."""
    import logging

    handlers = [*logging.getLogger(logger).handlers, *logging.getLogger().handlers]
    if logging.lastResort is not None:
        handlers.append(logging.lastResort)
    for handler in handlers:
        for old in [f for f in handler.filters if isinstance(f, LogFilter)]:
            handler.removeFilter(old)
        handler.addFilter(LogFilter(redactor))
