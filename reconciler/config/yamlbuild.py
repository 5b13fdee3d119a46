"""A composed YAML node graph -> plain values, problems and surprises (DESIGN.md §3, step 1,
second half).

``Builder`` constructs the values of one document from ``yamlnodes``' graph itself, so
that nothing changes type silently (the rules are in ``yamlload``'s docstring):
duplicate keys (merges included) and unsupported or mistyped tags are problems, YAML
1.1 coercions are recorded as ``Surprise`` entries, timestamps and binary stay text,
and the bounds ``MAX_NODES`` (alias bombs) and ``MAX_DEPTH`` end a document with
``Limit``.

Must not: read files, parse text or decide what a problem in a whole file means
(``yamlload`` does); it only builds and records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

from reconciler.config import problems as P
from reconciler.config.problems import Problem

# The tags and node classes, as module globals: the builder reads them once per value.
from reconciler.config.yamlnodes import (
    BOOL,
    FLOAT,
    INT,
    MAP,
    MAPPING_NODE,
    MERGE,
    NULL,
    SCALAR_NODE,
    SEQ,
    SEQUENCE_NODE,
    STR,
    Path_,
    at,
    implicit,
)

MAX_NODES = 10_000
"""Largest number of values one document may construct, aliases expanded: past it,
``yaml-aliases`` when an alias repeated a collection (an alias bomb), else
``too-many-values``."""

MAX_DEPTH = 64
"""Most collections nested inside one another in a document, the top-level mapping
included. A monitor needs about 4; ``jsonschema_rs`` fails on instances nested
past about 250 levels, and Python's recursion limit (1000 frames) must not be
reached while building (two frames per mapping level): 64 stays below both."""
_TEXT_TAGS = frozenset({STR, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_YN = frozenset({"y", "Y", "n", "N"})
_BOOL_TEXT = frozenset({"yes", "no", "true", "false", "on", "off"})
_NULL_TEXT = frozenset({"", "~", "null", "Null", "NULL"})
_TYPE_NAMES = {INT: "an integer", FLOAT: "a number", BOOL: "a boolean", NULL: "null"}
_CONSTRUCTOR = SafeConstructor()


@dataclass(frozen=True, slots=True)
class Surprise:
    """A plain scalar that YAML 1.1 read as something other than its text.

    Attributes:
        rule: ``yaml11-bool``, ``yaml11-octal`` or ``yaml11-sexagesimal``.
        text: the scalar as written (``yes``, ``0777``, ``1:30``).
        value: what YAML 1.1 made of it (``True``, ``511``, ``90``; ``y`` stays ``"y"``
            in PyYAML but other YAML 1.1 readers make it a boolean).
        line, col: 1-based position.
    """

    rule: str
    text: str
    value: Any
    line: int
    col: int

    def hint(self) -> str:
        """How to write what was probably meant."""
        if self.rule == "yaml11-bool":
            return (f"unquoted {self.text} is a YAML 1.1 boolean "
                    f"({str(self.value).lower()}); quote it ('{self.text}') to mean the text")
        if self.rule == "yaml11-octal":
            return (f"unquoted {self.text} is a YAML 1.1 octal number ({self.value}); "
                    f"quote it ('{self.text}') for text")
        return (f"unquoted {self.text} is a YAML 1.1 base-60 number ({self.value}); quote it "
                f"('{self.text}') for text, or write a duration such as 1m30s")



class Limit(Exception):
    """A bound was passed: the document is refused as a whole. ``node`` is where, when
    its position means something (aliases have no marks of their own)."""

    def __init__(self, message: str, rule: str, path: Path_,
                 node: yaml.Node | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.path = path
        self.node = node


class Builder:
    """Constructs values from a composed node graph, recording problems."""

    def __init__(self, file: str, text: str | None = None) -> None:
        self.file = file
        self.text = text
        self.count = 0
        self.active: set[int] = set()
        self.built: set[int] = set()  # collections built so far (an alias repeats one)
        self.aliased = False
        self.problems: list[Problem] = []
        self.surprises: dict[Path_, Surprise] = {}

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            if self.aliased:
                raise Limit(f"more than {MAX_NODES} values after expanding aliases "
                             f"(an alias bomb?)", "yaml-aliases", path)
            raise Limit(f"too many values: more than {MAX_NODES} in one document (lists, "
                         f"mappings and scalars)", "too-many-values", path)
        cls = node.__class__
        if cls is SCALAR_NODE:
            return self.scalar(node, path)  # type: ignore[arg-type]
        ident = id(node)
        if ident in self.active:
            raise Limit("recursive alias: a node contains itself", "yaml-aliases", path)
        if ident in self.built:  # a collection built twice: an alias expands it again
            self.aliased = True
        self.built.add(ident)
        if len(path) >= MAX_DEPTH:
            raise Limit(f"nested deeper than {MAX_DEPTH} levels (lists and mappings inside "
                         f"one another)", "yaml-depth", path, node)
        self.active.add(ident)
        try:
            if cls is MAPPING_NODE:
                if node.tag != MAP:
                    self.bad_tag(node, path)
                return self.mapping(node, path)  # type: ignore[arg-type]
            if cls is SEQUENCE_NODE:
                if node.tag != SEQ:
                    self.bad_tag(node, path)
                out: list[Any] = []
                append = out.append
                for i, item in enumerate(node.value):
                    if (item.__class__ is SCALAR_NODE and item.tag == STR
                            and (item.style or item.value not in _YN)
                            and self.count < MAX_NODES):
                        self.count += 1  # the common case, inlined: a plain string item
                        append(item.value)
                    else:
                        append(self.build(item, (*path, i)))
                return out
        finally:
            self.active.discard(ident)
        return None  # pragma: no cover - composer yields only the three node kinds

    def mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        seen: dict[str, yaml.Node] = {}
        merge: tuple[yaml.Node, yaml.Node] | None = None
        for key_node, value_node in node.value:
            if key_node.__class__ is not SCALAR_NODE:
                self.add(key_node, path, "a mapping key must be plain text", "yaml-syntax")
                continue
            if key_node.tag == MERGE:
                if merge is not None:
                    self.add(key_node, path, f"a second merge key << in one mapping (first "
                             f"at line {self.line(merge[0])}); merge a list: <<: [*a, *b]",
                             "duplicate-key")
                    continue
                merge = (key_node, value_node)
                continue
            key = key_node.value
            if key in seen:
                self.add(key_node, (*path, key),
                         f"duplicate key {key!r} (first at line {self.line(seen[key])}); "
                         f"YAML would silently keep this one", "duplicate-key")
            seen[key] = key_node
            if (value_node.__class__ is SCALAR_NODE and value_node.tag == STR
                    and (value_node.style or value_node.value not in _YN)
                    and self.count < MAX_NODES):
                self.count += 1  # the common case, inlined: a plain string value
                out[key] = value_node.value
            else:
                out[key] = self.build(value_node, (*path, key))
        if merge is not None:
            self.merge(out, seen, merge, path)
        return out

    def merge(self, out: dict[str, Any], seen: dict[str, yaml.Node],
              merge: tuple[yaml.Node, yaml.Node], path: Path_) -> None:
        """Add the keys a merge key brings (YAML 1.1 merge type: explicit keys win, then
        the earlier merged mapping). A key set twice is a ``duplicate-key`` problem:
        at the explicit key, or at ``<<`` for two merged mappings."""
        key_node, source = merge
        merged_from: dict[str, int] = {}
        sources = source.value if source.__class__ is SEQUENCE_NODE else [source]
        for src in sources:
            value = self.build(src, path)
            if not isinstance(value, dict):
                self.add(src, path, "a merge (<<) needs a mapping", "yaml-syntax")
                continue
            line = self.line(src)
            for k, v in value.items():
                if k in seen:
                    self.add(seen[k], (*path, k),
                             f"duplicate key {k!r}: the merge (<<) at line "
                             f"{self.line(key_node)} also sets it; YAML would "
                             f"silently keep this one", "duplicate-key")
                elif k in merged_from:
                    self.add(key_node, (*path, k),
                             f"duplicate key {k!r}: merged from the mappings at line "
                             f"{merged_from[k]} and line {line}; YAML would silently keep "
                             f"the first", "duplicate-key")
                else:
                    merged_from[k] = line
                    out[k] = v

    def scalar(self, node: yaml.ScalarNode, path: Path_) -> Any:
        tag, text = node.tag, node.value
        if tag in _TEXT_TAGS:
            if not node.style and text in _YN:
                self.surprise(node, path, "yaml11-bool", text in "yY")
            return text
        plain = not node.style
        if tag == NULL:
            if text in _NULL_TEXT:
                return None
            return self.not_of_type(node, path)
        if tag == BOOL:
            lowered = text.lower()
            if lowered not in _BOOL_TEXT:
                return self.not_of_type(node, path)
            value = lowered in ("yes", "true", "on")
            if plain and lowered not in ("true", "false"):
                self.surprise(node, path, "yaml11-bool", value)
            return value
        if tag in (INT, FLOAT):
            try:
                result: Any = (_CONSTRUCTOR.construct_yaml_int(node) if tag == INT
                               else _CONSTRUCTOR.construct_yaml_float(node))
            except (ValueError, IndexError, OverflowError):
                # "0b_" matches YAML 1.1's int pattern without a digit; a plain one
                # stays text (as YAML 1.2 reads it), an explicit tag is a problem.
                return text if plain and implicit(text) == tag else self.not_of_type(node,
                                                                                      path)
            if plain and ":" in text:
                self.surprise(node, path, "yaml11-sexagesimal", result)
            elif tag == INT and plain and _OCTAL.fullmatch(text) and text.strip("+-0_"):
                self.surprise(node, path, "yaml11-octal", result)
            return result
        self.bad_tag(node, path)
        return text

    def not_of_type(self, node: yaml.ScalarNode, path: Path_) -> str:
        """A core tag on a value that is not of its type: a problem; the text is kept."""
        short = node.tag.rsplit(":", 1)[-1]
        text = node.value if len(node.value) <= 40 else node.value[:37] + "..."
        self.add(node, path, f"!!{short} {text!r} is not {_TYPE_NAMES[node.tag]}: drop the "
                 f"tag, or write a value of that type", "yaml-tag")
        return str(node.value)

    def surprise(self, node: yaml.Node, path: Path_, rule: str, value: Any) -> None:
        line, col = at(node.start_mark, self.text)
        self.surprises[path] = Surprise(rule, str(node.value), value, line, col)

    def bad_tag(self, node: yaml.Node, path: Path_) -> None:
        self.add(node, path, f"unsupported YAML tag {node.tag}; use plain values", "yaml-tag")

    def line(self, node: yaml.Node) -> int:
        """The 1-based line of ``node`` (for messages naming another line)."""
        return at(node.start_mark, self.text)[0]

    def add(self, node: yaml.Node, path: Path_, message: str, rule: str) -> None:
        line, col = at(node.start_mark, self.text)
        self.problems.append(P.error(self.file, line, col, P.dotted(path), message, rule))
