"""Schema validation with every error mapped to the line and column of its YAML node.

``check(doc, kind)`` runs the compiled validator (``config.schemas``) and turns
each error into a ``Problem``: the offending value's position for a wrong value,
the key's position for an unknown field (with a did-you-mean suggestion from
``difflib``), the parent mapping's line for a missing required field. YAML 1.1
coercions (``yes``, ``0777``, ``1:30``) are reported as such where they broke
the schema, and octal and base-60 numbers everywhere. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from reconciler import durations
from reconciler.config import problems as P
from reconciler.config import schemas
from reconciler.config.problems import Problem
from reconciler.config.yamlload import Document, Path_

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string",
               list: "list", dict: "mapping", type(None): "empty (null)"}

_PATTERN_HINTS = {
    "name": "must be lowercase letters, digits and '-', start with a letter, at most 63 "
            "characters",
    "device": "must be a device name: letters, digits, '.', '_' and '-', at most 63 characters",
    "monitor": "must be a monitor name: lowercase letters, digits and '-', start with a letter",
    "url": "must be an absolute URL",
    "secretEnv": "must be an environment variable name (letters, digits and _)",
}


def type_name(value: Any) -> str:
    """JSON-ish name of a Python value's type, for messages."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def suggest(word: str, options: Sequence[str]) -> str:
    """`` (did you mean 'source'?)`` for a near miss among ``options``, else ``""``
    (``difflib.get_close_matches``, cutoff 0.6; imported only when there is a miss)."""
    import difflib

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _value_at(data: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def check(doc: Document, *, kind: schemas.Kind = "monitor") -> list[Problem]:
    """Validate ``doc.data`` against the ``kind`` schema; return problems (may be empty).

    Never raises on bad input. Errors at one instance path are reported once
    each (the first error per path and rule wins), in document order after sorting.
    """
    out: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    reported: set[Path_] = set()
    for err in schemas.validator(kind).iter_errors(doc.data):
        path: Path_ = tuple(err.instance_path)
        for problem in _translate(doc, kind, err, path, reported):
            key = (problem.field, problem.rule + problem.message)
            if key not in seen:
                seen.add(key)
                out.append(problem)
    out.extend(_surprises(doc, reported))
    return out


def _translate(doc: Document, kind: schemas.Kind, err: Any, path: Path_,
               reported: set[Path_]) -> list[Problem]:
    name = err.kind.name
    detail = err.kind.as_dict()
    schema_path = list(err.schema_path)
    file = doc.file
    value = _value_at(doc.data, path)
    field = P.dotted(path)

    if name == "required":
        prop = str(detail.get("property", ""))
        line, col = doc.parent_position(path)
        where = f" in {field}" if field else ""
        return [P.error(file, line, col, P.dotted((*path, prop)),
                        f"missing required field {prop!r}{where}", "schema")]
    if name == "additionalProperties":
        allowed = sorted((schemas.at(kind, schema_path[:-1]) or {}).get("properties", {}))
        out = []
        for extra in detail.get("unexpected", []):
            line, col = doc.position((*path, extra), key=True)
            did = suggest(extra, allowed) or (
                f"; known fields: {', '.join(allowed)}" if allowed else "")
            out.append(P.error(file, line, col, P.dotted((*path, extra)),
                               f"unknown field {extra!r}{did}", "unknown-field"))
        return out
    if name == "propertyNames":
        sub = schemas.at(kind, [*schema_path[:-1]]) or {}
        pattern = re.compile(str(sub.get("pattern", ".*")))
        out = []
        for key in value if isinstance(value, dict) else {}:
            if not pattern.fullmatch(key):
                line, col = doc.position((*path, key), key=True)
                out.append(P.error(file, line, col, P.dotted((*path, key)),
                                   f"invalid name {key!r}: letters, digits, '.', '_', '/' and "
                                   f"'-', starting with a letter or digit, at most 63",
                                   "schema"))
        return out

    line, col = doc.position(path)
    surprise = doc.surprises.get(path)
    if surprise is not None:
        reported.add(path)
        return [P.error(file, line, col, field, surprise.hint(), surprise.rule)]
    if "duration" in schema_path and name in ("oneOf", "pattern", "type", "minimum"):
        try:
            durations.parse(value)
            message = f"invalid duration {value!r}"
        except ValueError as e:
            message = str(e)
        return [P.error(file, line, col, field, message, "bad-duration")]
    if name == "type":
        types = detail.get("types", [])
        wanted = " or ".join("mapping" if t == "object" else "list" if t == "array" else t
                             for t in types)
        hint = ("; quote it" if types == ["string"] and isinstance(value, int | float)
                else "")
        return [P.error(file, line, col, field,
                        f"expected {wanted}, got {type_name(value)}: {_short(value)}{hint}",
                        "schema")]
    if name == "enum":
        options = [str(o) for o in detail.get("options", [])]
        did = suggest(str(value), options) if isinstance(value, str) else ""
        return [P.error(file, line, col, field,
                        f"{_short(value)} is not one of {', '.join(options)}{did}", "schema")]
    if name == "const":
        return [P.error(file, line, col, field,
                        f"must be {detail.get('expected_value')!r}, got {_short(value)}",
                        "schema")]
    if name == "pattern":
        last = str(next((s for s in reversed(path) if isinstance(s, str)), ""))
        explain = _PATTERN_HINTS.get(last)
        if explain is None and (last in ("device", "devices") or "device" in schema_path):
            explain = _PATTERN_HINTS["device"]
        if explain is None and str(last) == "url":
            explain = f"must match {detail.get('pattern')}"
        message = f"{_short(value)}: {explain}" if explain else (
            f"{_short(value)} does not match {detail.get('pattern')}")
        return [P.error(file, line, col, field, message, "schema")]
    if name == "not" and not path and kind == "monitor":
        line, col = doc.position(("devices",), key=True)
        return [P.error(file, line, col, "devices",
                        "set device (one owner) or devices (an allowlist), not both", "schema")]
    if name == "not" and path == ("condition",):
        line, col = doc.position(("condition", "match"), key=True)
        mode = value.get("mode", "on-change") if isinstance(value, dict) else "on-change"
        return [P.error(file, line, col, "condition.match",
                        f"match is only used with mode: match (mode is {mode}); "
                        f"add mode: match or use dedupeKey", "schema")]
    if name == "oneOf" and path and path[-1] == "command":
        message = "expected a non-empty command string or a list of argv strings"
        surprise = next((s for p, s in doc.surprises.items() if tuple(p[:len(path)]) == path),
                        None)
        if surprise is not None:  # e.g. command: [yes] -> [True]
            line, col, message = surprise.line, surprise.col, f"{message}; {surprise.hint()}"
        return [P.error(file, line, col, field, message, "schema")]
    if name in ("oneOf", "anyOf") and kind == "overlay":
        if path == ("pin",):
            return [P.error(file, line, col, field,
                            "pin needs exactly one of device or devices", "schema")]
        if not path:
            return [P.error(file, line, col, field,
                            "an overlay needs pause or pin (or both)", "schema")]
    if name == "minLength":
        return [P.error(file, line, col, field, "must not be empty", "schema")]
    if name == "minItems":
        return [P.error(file, line, col, field, "must not be an empty list", "schema")]
    message = str(err.message)
    if len(message) > 200:
        message = message[:200] + "..."
    return [P.error(file, line, col, field, message, "schema")]


def _surprises(doc: Document, reported: set[Path_]) -> list[Problem]:
    """YAML 1.1 coercions the schema accepted: octal/base-60 numbers are errors
    (YAML 1.2 reads them as text), yes/no/on/off booleans and y/n are warnings."""
    out = []
    for path, s in doc.surprises.items():
        if path in reported:
            continue
        field = P.dotted(path)
        if s.rule == "yaml11-bool":
            if isinstance(s.value, bool) and not isinstance(_value_at(doc.data, path), str):
                message = (f"unquoted {s.text} is read as {str(s.value).lower()} by YAML 1.1 "
                           f"only; write {str(s.value).lower()}")
            else:
                message = s.hint()
            out.append(P.warning(doc.file, s.line, s.col, field, message, s.rule))
        else:
            out.append(P.error(doc.file, s.line, s.col, field, s.hint(), s.rule))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
