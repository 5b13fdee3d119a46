"""Render action templates: Jinja2 in a ``SandboxedEnvironment`` with ``StrictUndefined``.

The dialect (and the short form ``{event}``) is ``reconciler.templates``. The
context of every template (``templates.CONTEXT_NAMES``)::

    event        str   the event summary
    observation  str   the observation text (capped, see ``events.EXCERPT_CHARS``)
    signature    str   the condition's signature
    groups       list  the match regex's groups (None for a group that did not take part)
    monitor      dict  {"name": str, "description": str}
    firedAt      str   ISO-8601 UTC time of the fire

A render error (bad syntax, an undefined name, a sandbox violation) is an
``errors.ActionError``: the dispatch fails and is recorded, the daemon goes on.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import SandboxedEnvironment

from reconciler import errors, templates
from reconciler.events import Event
from reconciler.model import Monitor

_ENV = SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False)
_MAX_OUTPUT = 1024 * 1024  # characters; a template that expands past this is refused


def context(monitor: Monitor, event: Event) -> dict[str, Any]:
    """Return the template context for ``event`` of ``monitor`` (keys: ``CONTEXT_NAMES``)."""
    return {
        "event": event.summary,
        "observation": event.observation,
        "signature": event.signature,
        "groups": list(event.groups),
        "monitor": {"name": str(monitor.name), "description": monitor.description},
        "firedAt": event.fired_at,
    }


@functools.lru_cache(maxsize=512)
def _compile(text: str) -> jinja2.Template:
    return _ENV.from_string(templates.expand_short_form(text))


def render(text: str, ctx: dict[str, Any]) -> str:
    """Render template ``text`` (long or short form) with ``ctx``.

    Raises:
        errors.ActionError: ``template: <what is wrong>`` for a syntax error, an
            undefined name, a sandbox violation or an output over 1 MiB.
    """
    try:
        out = _compile(text).render(ctx)
    except jinja2.TemplateSyntaxError as e:
        raise errors.ActionError(f"template: line {e.lineno}: {e.message}") from e
    except jinja2.UndefinedError as e:
        raise errors.ActionError(f"template: {e.message}") from e
    except jinja2.exceptions.SecurityError as e:
        raise errors.ActionError(f"template: not allowed: {e}") from e
    except Exception as e:  # a filter raising on odd input: still a failed render
        raise errors.ActionError(f"template: {type(e).__name__}: {e}") from e
    if len(out) > _MAX_OUTPUT:
        raise errors.ActionError(f"template: output is {len(out)} characters (max {_MAX_OUTPUT})")
    return out


def check(text: str) -> str | None:
    """Return what is statically wrong with template ``text``, or None.

    Finds syntax errors and names outside the context (``templates.CONTEXT_NAMES``);
    used by lint. Errors only visible with data (an attribute missing at render
    time) are left to ``render``.
    """
    try:
        ast = _ENV.parse(templates.expand_short_form(text))
    except jinja2.TemplateSyntaxError as e:
        return f"template syntax error at line {e.lineno}: {e.message}"
    unknown = sorted(meta.find_undeclared_variables(ast) - templates.CONTEXT_NAMES)
    if unknown:
        known = ", ".join(sorted(templates.CONTEXT_NAMES))
        return f"unknown template variable {', '.join(map(repr, unknown))} (known: {known})"
    return None
