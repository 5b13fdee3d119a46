"""Schema validation with every error mapped to the line and column of its YAML node.

``check(doc, kind)`` runs the compiled validator (``config.schemas``) and turns
each error into a ``Problem``: the offending value's position for a wrong value,
the key's position for an unknown field (with a did-you-mean suggestion from
``difflib``), the parent mapping's line for a missing required field. YAML 1.1
coercions (``yes``, ``0777``, ``1:30``) are reported as such where they broke
the schema, and octal and base-60 numbers everywhere. Pure: no I/O.

Cascades are cut at their cause, so one mistake is one error:

* a mapping whose schema picks its shape by a ``type`` field (``source``,
  ``action``: an ``allOf`` of ``if``/``then`` branches) and whose ``type`` is
  missing or not a known value gets only that error (a missing ``type`` makes
  every ``if`` true in JSON Schema 2020-12 §10.2.2.1, so every branch would
  complain); the known values are listed, with a did-you-mean for a near miss;
* a node ``yamlload`` rejected for its tag (``!!python/object...``) already has
  its ``yaml-tag`` error: schema errors beneath or about it are not reported.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from reconciler import durations
from reconciler.actions import registry as actions_registry
from reconciler.config import problems as P
from reconciler.config import schemas
from reconciler.config.problems import Problem
from reconciler.config.yamlload import Document, Path_
from reconciler.sources import registry as source_types

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
    validator = schemas.validator(kind)
    # ``is_valid`` first: a valid document (the common case) costs one pass that builds
    # no error objects (about 30% less than an empty ``iter_errors``) and pays for none
    # of what follows
    errs = [] if validator.is_valid(doc.data) else list(validator.iter_errors(doc.data))
    if errs:
        errs, out = _cut_cascades(doc, kind, errs)
    for err in errs:
        path: Path_ = tuple(err.instance_path)
        for problem in _translate(doc, kind, err, path, reported):
            key = (problem.field, problem.rule + problem.message)
            if key not in seen:
                seen.add(key)
                out.append(problem)
    out.extend(_surprises(doc, reported))
    return out


# Tags ``yamlload`` accepts; any other tag on a node is a ``yaml-tag`` error there.
_CORE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in (
    "str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary"))

# Display order of a discriminator's values where DESIGN.md has one (the schema's
# enum order is kept for anything not listed).
_ORDER = (*source_types.TYPES, *actions_registry.TYPES)


def _ordered(options: Iterable[str]) -> list[str]:
    """``options`` in ``_ORDER`` (stable: unlisted values keep their order, last)."""
    return sorted(options, key=lambda o: _ORDER.index(o) if o in _ORDER else len(_ORDER))


@functools.cache
def _discriminators(kind: schemas.Kind) -> tuple[tuple[Path_, str, tuple[str, ...]], ...]:
    """``(instance path, key, allowed values)`` of each mapping in the ``kind`` schema
    whose shape is chosen by ``key``: it requires ``key``, enumerates its values and
    has an ``allOf`` of ``if: {properties: {key: {const: ...}}}`` branches. Found by
    walking ``properties`` (no ``$ref``); cached."""
    found: list[tuple[Path_, str, tuple[str, ...]]] = []

    def walk(node: Any, path: Path_, depth: int) -> None:
        if not isinstance(node, dict) or depth > 4:
            return
        branches = node.get("allOf")
        if isinstance(branches, list) and branches:
            keys = {k for b in branches if isinstance(b, dict)
                    for k, v in ((b.get("if") or {}).get("properties") or {}).items()
                    if isinstance(v, dict) and "const" in v}
            for key in keys:
                enum = ((node.get("properties") or {}).get(key) or {}).get("enum")
                if key in (node.get("required") or []) and isinstance(enum, list):
                    found.append((path, key, tuple(str(o) for o in enum)))
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, (*path, name), depth + 1)

    walk(schemas.document(kind), (), 0)
    return tuple(found)


def _under(path: Path_, prefix: Path_) -> bool:
    return path[:len(prefix)] == prefix


def _tag_rejected(doc: Document, path: Path_) -> bool:
    """True when a node on ``path`` (the root, each step, the deepest node that
    exists) carries a tag ``yamlload`` refused."""
    node: Any = doc.root
    for step in (None, *path):
        if step is not None:
            if isinstance(node, yaml.MappingNode):
                nxt = None
                for k, v in node.value:  # the last duplicate wins, as in the loader
                    if getattr(k, "value", None) == step:
                        nxt = v
                if nxt is None:
                    return False
                node = nxt
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if not 0 <= step < len(node.value):
                    return False
                node = node.value[step]
            else:
                return False
        if node.tag not in _CORE_TAGS:
            return True
    return False


def _cut_cascades(doc: Document, kind: schemas.Kind,
                  errs: list[Any]) -> tuple[list[Any], list[Problem]]:
    """Drop errors that only restate another one (see the module docstring).

    Returns:
        ``(errors still to translate, problems already made)``: a missing
        discriminator becomes one ready-made problem listing the allowed values.
    """
    made: list[Problem] = []
    cut: list[Path_] = []
    for path, key, options in _discriminators(kind):
        value = _value_at(doc.data, path)
        if not isinstance(value, dict) or value.get(key) in options:
            continue
        cut.append(path)
        if key not in value and not _tag_rejected(doc, path):
            line, col = doc.parent_position(path)
            made.append(P.error(doc.file, line, col, P.dotted(path),
                                f"missing required field {key!r} (one of "
                                f"{', '.join(_ordered(options))})", "schema"))
    kept = []
    for err in errs:
        path = tuple(err.instance_path)
        if _tag_rejected(doc, path):
            continue
        cascade = next((c for c in cut if _under(path, c)), None)
        if cascade is not None and not (
                len(path) == len(cascade) + 1 and path[-1] in _keys_of(kind, cascade)):
            continue
        kept.append(err)
    return kept, made


def _keys_of(kind: schemas.Kind, path: Path_) -> set[str]:
    return {k for p, k, _ in _discriminators(kind) if p == path}


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
            message = f"invalid duration {_short(value)}"
        except ValueError as e:
            message = str(e)
        except OverflowError:
            message = f"duration {_short(value)} is too large"
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
        options = _ordered(str(o) for o in detail.get("options", []))
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
        if explain is None and (last in ("device", "devices", "owners") or "device" in schema_path):
            explain = _PATTERN_HINTS["device"]
        if explain is None and str(last) == "url":
            explain = f"must match {detail.get('pattern')}"
        message = f"{_short(value)}: {explain}" if explain else (
            f"{_short(value)} does not match {detail.get('pattern')}")
        return [P.error(file, line, col, field, message, "schema")]
    if name == "not" and not path and kind == "monitor" and isinstance(value, dict) \
            and "owners" in value:
        line, col = doc.position(("owners",), key=True)
        return [P.error(file, line, col, "owners",
                        "owners (failover on an etcd lease) goes alone: not with device "
                        "or devices", "schema")]
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
