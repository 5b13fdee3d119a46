"""Semantic checks on one monitor document (DESIGN.md §3, step 2).

What JSON Schema cannot say: names match file stems, durations parse and
intervals lie within 500ms..7d, regexes compile with Python ``re`` (the engine
the conditions use), Jinja2 templates parse, and the coverage lint (a ``match``
naming only a success token: silence is not success). Cross-file checks
(duplicate names and fingerprints, shadowing, overlays) live in ``loader``.
Pure: no I/O.

The document need not be schema-valid: every check looks only at a field of the
type it expects and skips anything else (the schema reports it), so the loader
runs these beside schema errors and one lint run reports every independent
problem. Never raises on any document ``yamlload`` builds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from reconciler import durations, templates
from reconciler.actions import registry as actions_registry
from reconciler.conditions import lifecycle
from reconciler.conditions import registry as condition_registry
from reconciler.config import problems as P
from reconciler.config.problems import Problem
from reconciler.config.yamlload import Document
from reconciler.findings import Finding
from reconciler.sources import registry as source_types

NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")


# Duration fields per mapping; intervals are range-checked (500ms..7d). The action's
# come from its registry when a document has an action (importing the type modules).
_DURATIONS: dict[str, Callable[[], tuple[str, ...]]] = {
    "source": lambda: ("interval", "timeout", "backoff"),
    "action": actions_registry.duration_fields,
    "rateLimit": lambda: ("per",),
}
# Templates that need no Jinja2 parser: plain text, {{ dotted.name }}, and flat
# {% if dotted.name %}...{% else %}...{% endif %} blocks (no nesting, no filters, no
# whitespace control). Anything else, and any name outside the event context, goes
# to Jinja2 itself (which then gives the exact message).
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_TEXT = r"(?:[^{]|\{(?![{%#]))*(?:\{\{\s*" + _DOTTED + r"\s*\}\}(?:[^{]|\{(?![{%#]))*)*"
_SIMPLE_TEMPLATE = re.compile(
    _TEXT + r"(?:\{%\s*if\s+" + _DOTTED + r"\s*%\}" + _TEXT
    + r"(?:\{%\s*else\s*%\}" + _TEXT + r")?\{%\s*endif\s*%\}" + _TEXT + r")*"
)
_NAMES = re.compile(r"(?:\{\{|\{%\s*if\s)\s*([A-Za-z_]\w*)")


def check(doc: Document, *, stem: str) -> list[Problem]:
    """Semantic problems of the monitor ``doc`` (schema-valid or not) whose file stem is
    ``stem``; fields of an unexpected type are skipped."""
    out: list[Problem] = []
    data = doc.data
    out.extend(_name(doc, stem))
    for section, keys in _DURATIONS.items():
        mapping = data.get(section)
        if not isinstance(mapping, dict):
            continue
        for key in keys():
            if key in mapping:
                out.extend(_duration(doc, (section, key), mapping[key]))
    condition = data.get("condition")
    if isinstance(condition, dict):
        out.extend(_findings(doc, condition_registry.check(condition)))
    out.extend(_findings(doc, lifecycle.check(data)))
    action = data.get("action")
    if isinstance(action, dict):
        for key in actions_registry.template_fields():
            if isinstance(action.get(key), str):
                out.extend(_template(doc, ("action", key), action[key]))
    for section in ("source", "action"):
        mapping = data.get(section)
        if isinstance(mapping, dict) and isinstance(mapping.get("url"), str):
            out.extend(_url(doc, (section, "url"), mapping["url"]))
    source = data.get("source")
    if isinstance(source, dict):
        out.extend(_findings(doc, source_types.check(source)))
    return out


def url_error(text: str) -> str | None:
    """Why ``text`` is not a usable URL (bad port, bad IPv6 literal, no host), or None.

    Parsed with ``urllib.parse`` (RFC 3986 syntax); the scheme is the schema's job.
    """
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        port = parts.port  # raises ValueError outside 0..65535
    except ValueError as e:
        return f"{text!r} is not a valid URL: {e}"
    if not parts.hostname:
        return f"{text!r} has no host"
    if port == 0:
        return f"{text!r}: port 0 cannot be connected to"
    return None


def _url(doc: Document, path: tuple[str, str], text: str) -> list[Problem]:
    message = url_error(text)
    if message is None:
        return []
    line, col = doc.position(path)
    return [P.error(doc.file, line, col, P.dotted(path), message, "bad-url")]


def _name(doc: Document, stem: str) -> list[Problem]:
    name = doc.data.get("name")
    if isinstance(name, str):
        if name != stem:
            line, col = doc.position(("name",))
            return [P.error(doc.file, line, col, "name",
                            f"name {name!r} does not match the file name {stem!r}: rename the "
                            f"file to {name}.yml or drop the name field", "name-mismatch")]
        return []
    if not NAME.fullmatch(stem):
        return [P.error(doc.file, 1, 1, "",
                        f"file name {stem!r} is not a monitor name (lowercase letters, digits and "
                        f"'-', starting with a letter, at most 63): rename the file",
                        "bad-filename")]
    return []


def _duration(doc: Document, path: tuple[str, str], value: Any) -> list[Problem]:
    try:
        found = duration_error(path == ("source", "interval"), value)
    except TypeError:  # unhashable: the schema should have refused it already
        found = duration_error.__wrapped__(path == ("source", "interval"), value)
    if found is None:
        return []
    line, col = doc.position(path)
    return [P.error(doc.file, line, col, P.dotted(path), found[0], found[1])]


@functools.lru_cache(maxsize=1024, typed=True)
def duration_error(interval: bool, value: Any) -> tuple[str, str] | None:
    """``(message, rule)`` when ``value`` is not a usable duration (``durations.parse``),
    is not above zero, or (``interval``) lies outside 500ms..7d; else None. Cached:
    the same few values (``30s``, ``5m``) recur across a repository's monitors."""
    try:
        seconds = durations.parse(value)
    except ValueError as e:
        return str(e), "bad-duration"
    except OverflowError:
        return f"duration {str(value)[:20]}... is too large", "bad-duration"
    if interval and not durations.MIN_INTERVAL <= seconds <= durations.MAX_INTERVAL:
        return f"interval {value!r} is outside 500ms..7d", "interval-range"
    if seconds <= 0:
        return f"{value!r} must be more than zero", "bad-duration"
    return None


@functools.lru_cache(maxsize=4096)
def template_error(text: str) -> str | None:
    """Return why ``text`` is not a valid template (short form ``{event}`` accepted), or None.

    A template must parse and name only the event context (``templates.CONTEXT_NAMES``:
    event, observation, signature, groups, monitor, firedAt). Plain text,
    ``{{ name }}`` / ``{{ a.b }}`` substitutions and flat ``{% if name %}`` ...
    ``{% else %}`` ... ``{% endif %}`` blocks naming only the context are accepted
    without loading Jinja2 (a subset Jinja2 always parses); anything else is parsed
    by a sandboxed Jinja2 environment (``jinja2.sandbox.SandboxedEnvironment().parse``,
    ``jinja2.meta``), which gives the message.
    """
    expanded = templates.expand_short_form(text)
    names = set(_NAMES.findall(expanded)) if _SIMPLE_TEMPLATE.fullmatch(expanded) else None
    if names is None or not names <= templates.CONTEXT_NAMES:
        from jinja2 import TemplateSyntaxError, meta

        try:
            names = meta.find_undeclared_variables(_jinja().parse(expanded))
        except TemplateSyntaxError as e:
            return f"line {e.lineno}: {e.message}" if e.lineno and e.lineno > 1 else str(e.message)
        except RecursionError:
            return "template nested too deeply"
    unknown = sorted(names - templates.CONTEXT_NAMES)
    if unknown:
        return (f"unknown variable {', '.join(map(repr, unknown))} (known: "
                f"{', '.join(sorted(templates.CONTEXT_NAMES))})")
    return None


@functools.cache
def _jinja() -> Any:
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment()


def _template(doc: Document, path: tuple[str, str], text: str) -> list[Problem]:
    problem = template_error(text)
    if problem is None:
        return []
    line, col = doc.position(path)
    return [P.error(doc.file, line, col, P.dotted(path), f"invalid template: {problem}",
                    "bad-template")]


def _findings(doc: Document, findings: list[Finding]) -> list[Problem]:
    """A type module's position-free ``Finding``s as ``Problem``s at their fields."""
    out = []
    for f in findings:
        line, col = doc.position(f.path)
        out.append(P.Problem(doc.file, line, col, P.dotted(f.path), f.message, f.severity,
                             f.rule))
    return out
