"""YAML text -> a node graph with positions (DESIGN.md §3, step 1, first half).

Composes one document with PyYAML's C parser and composer, resolving plain scalars
with YAML 1.1's implicit resolvers (the same answers as ``yaml.resolver.Resolver``,
cached per text), and turns libyaml's marks into the 1-based ``(line, col)`` an
editor shows. ``yamlbuild`` constructs values from the graph; ``yamlload`` is the
entry point that reads files and reports problems.

Must not: construct Python values, report problems or read files; it raises what
PyYAML raises (``yamlload`` turns that into problems).
"""

from __future__ import annotations

import operator
import re
from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.resolver import Resolver

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
BOOL = "tag:yaml.org,2002:bool"
NULL = "tag:yaml.org,2002:null"
MAP = "tag:yaml.org,2002:map"
SEQ = "tag:yaml.org,2002:seq"
MERGE = "tag:yaml.org,2002:merge"

SCALAR_NODE, SEQUENCE_NODE, MAPPING_NODE = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode

Path_ = tuple[str | int, ...]
"""An instance path: mapping keys and list indexes from the document's root."""

_IMPLICIT_FIRST = frozenset(k for k in Resolver.yaml_implicit_resolvers if k)
_RESOLVED: dict[str, str] = {}  # plain scalar text -> implicit tag (it depends on the text only)
_IMPLICIT: dict[str, list[tuple[str, Any]]] = {
    k: list(v) for k, v in Resolver.yaml_implicit_resolvers.items() if k is not None}


class Loader(CParser):
    """PyYAML's C parser and composer with the standard YAML 1.1 implicit resolvers
    (``yaml.resolver.Resolver.yaml_implicit_resolvers``; no path resolvers), resolved
    here without ``Resolver``'s per-call overhead: a plain scalar whose first character
    starts no implicit type is a string, other plain scalars are matched once per text
    (cached), collections take the default map/seq tags. Same answers as
    ``Resolver.resolve``."""

    # No path resolvers are registered: nothing to track. The composer calls these two
    # for every node; C callables that do nothing (a builtin is not bound as a method:
    # ``is_(parent, index)``, ``tuple()``) cost less than Python functions (about 7% of
    # a file's composing).
    descend_resolver = operator.is_
    ascend_resolver = tuple

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is not SCALAR_NODE:
            return MAP if kind is MAPPING_NODE else SEQ
        if not implicit[0] or (value and value[0] not in _IMPLICIT_FIRST):
            return STR
        tag = _RESOLVED.get(value)
        if tag is None:
            tag = STR
            for candidate, regexp in _IMPLICIT.get(value[:1], ()):
                if regexp.match(value):
                    tag = candidate
                    break
            if len(value) <= 32 and len(_RESOLVED) < 4096:
                _RESOLVED[value] = tag
        return tag


def implicit(text: str) -> str:
    """The tag YAML 1.1 gives the plain scalar ``text`` (as ``Loader.resolve``)."""
    for candidate, regexp in _IMPLICIT.get(text[:1], ()):
        if regexp.match(text):
            return candidate
    return STR


def compose(text: str) -> yaml.Node | None:
    """The node graph of the one document in ``text`` (None for an empty stream).

    Raises:
        yaml.YAMLError: a syntax error, an unacceptable character, a second document.
    """
    loader = Loader(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()


# Line breaks YAML 1.1 (so libyaml's marks) counts that editors and YAML 1.2 do not: a
# lone CR, NEL, LS and PS. A text holding one gets its positions counted by "\n".
ODD_BREAKS = re.compile("\r(?!\n)|[\x85\u2028\u2029]")


def odd_breaks(text: str) -> bool:
    """True when ``text`` holds a line break that only YAML 1.1 counts (``ODD_BREAKS``).
    Nearly every text holds none of their characters: four substring scans (memchr)
    answer that before the regex runs."""
    if "\r" not in text and "\x85" not in text and "\u2028" not in text \
            and "\u2029" not in text:
        return False
    return ODD_BREAKS.search(text) is not None


def at(mark: Any, text: str | None) -> tuple[int, int]:
    """1-based ``(line, col)`` of a libyaml mark. With ``text`` (only passed when it holds
    an odd line break, see ``ODD_BREAKS``) lines are counted by ``\n`` from the mark's
    character index, as an editor shows them."""
    if text is None:
        return mark.line + 1, mark.column + 1
    index = min(mark.index, len(text))
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1
