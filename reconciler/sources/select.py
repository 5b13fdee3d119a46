"""``source.select``: a JMESPath expression applied to JSON before the condition.

``poll`` applies it to stdout, ``command`` to each line, ``poll-http`` to the body (the
status line stays: ``<status>\\n<selected>``). The expression language is JMESPath
(https://jmespath.org/specification.html), evaluated by the ``jmespath`` library.

* The selected value becomes the observation text: a string as it is, anything else
  as JSON with sorted keys and two-space indentation (``null`` when nothing matched),
  so a diff of two selections is line by line.
* Text that is not JSON, or an expression that fails at run time (a type error in a
  function), is a check error of kind ``select`` (``condition.onError`` decides
  whether it is also an observation).
* Lint compiles the expression (``check``, rule ``bad-select``).

``jmespath`` is imported inside the functions, so lint without ``select`` never loads it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.findings import Finding
from reconciler.model import Observation

if TYPE_CHECKING:
    from jmespath.parser import ParsedResult

DESCRIPTION = ("A JMESPath expression applied to the JSON {what} before the condition; "
               "the selected value is the observation.")
"""The schema description of ``select`` (``{what}``: stdout, each line, the body)."""

EXAMPLE = "statuses[?state!='success'].context"


@functools.lru_cache(maxsize=4096)
def compiled(expression: str) -> ParsedResult:
    """The parsed expression (cached for thousands of monitors).

    Raises:
        jmespath.exceptions.JMESPathError: it does not parse.
    """
    import jmespath

    return jmespath.compile(expression)


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """A ``bad-select`` finding when ``raw["select"]`` (a string) does not compile."""
    expression = raw.get("select")
    if not isinstance(expression, str):
        return []
    from jmespath.exceptions import JMESPathError

    try:
        compiled(expression)
    except JMESPathError as e:
        return [Finding(("source", "select"), f"invalid JMESPath {expression!r}: {_why(e)}",
                        "bad-select")]
    return []


def _why(e: Exception) -> str:
    """One line from a jmespath error (its text spans lines and ends in a caret)."""
    first = str(e).strip().splitlines()[0].rstrip(":") if str(e).strip() else ""
    where = getattr(e, "lex_position", None)
    return (first or type(e).__name__) + (f" at column {where}" if where is not None else "")


def value_text(value: Any) -> str:
    """The observation text of a selected value (see the module docstring)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)


def apply(expression: str, document: str) -> str:
    """The text of ``expression`` applied to the JSON ``document``.

    Raises:
        errors.SourceError: kind ``select``: not JSON, or the expression fails.
    """
    from jmespath.exceptions import JMESPathError

    try:
        data = json.loads(document)
    except json.JSONDecodeError as e:
        raise errors.SourceError(f"not JSON: {e.msg} (line {e.lineno} column {e.colno})",
                                 kind="select") from None
    except RecursionError:
        raise errors.SourceError("not JSON this monitor can read: nested too deeply",
                                 kind="select") from None
    try:
        return value_text(compiled(expression).search(data))
    except JMESPathError as e:
        raise errors.SourceError(f"{expression}: {_why(e)}", kind="select") from None


def observation(expression: str, observed: Observation) -> Observation:
    """``observed`` with its text replaced by the selection (``poll-http`` applies
    ``apply`` to its body itself: its status and redirect lines stay).

    Raises:
        errors.SourceError: kind ``select``.
    """
    return Observation(apply(expression, observed.text), observed.meta)
