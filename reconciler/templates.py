"""The template dialect shared by lint (parse) and actions (render).

Templates are Jinja2 (rendered in a ``SandboxedEnvironment`` with
``StrictUndefined`` by ``actions.templating``). The short form ``{event}`` (single
braces, as in the original monitor model) is accepted and means ``{{ event }}``.
Nothing here renders or does I/O.
"""

from __future__ import annotations

import re

# {event} not part of {{ event }}: no brace on either side.
_SHORT = re.compile(r"(?<!\{)\{\s*(event)\s*\}(?!\})")

CONTEXT_NAMES = frozenset({"event", "observation", "signature", "groups", "monitor", "firedAt",
                           "kind", "previous", "current", "diff", "meta"})


def expand_short_form(text: str) -> str:
    """Rewrite the short form ``{event}`` to ``{{ event }}``; other text is unchanged."""
    return _SHORT.sub(r"{{ \1 }}", text)
