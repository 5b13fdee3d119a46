"""YAML with positions and without silent type changes (DESIGN.md §3, step 1).

Parsing uses PyYAML's C composer (``yaml.compose`` with ``CSafeLoader``), which
gives a node graph with line/column marks; we construct plain Python values from
it ourselves so that:

* a duplicate key in a mapping is a problem (PyYAML keeps the last one silently),
  and so is a key that a merge (``<<``, YAML 1.1's merge key type) would set while
  the mapping, or an earlier merged mapping, also sets it (YAML 1.1 keeps one of
  them silently); merge keys otherwise work;
* mapping keys are the key's text (``on:`` stays ``"on"``, never ``True``);
* timestamps stay strings (no ``datetime``), binary stays text;
* YAML 1.1 coercions of plain scalars (``yes/no/on/off`` -> bool, ``0777`` ->
  octal, ``1:30`` -> base 60) are recorded as ``Surprise`` entries, so the
  validator can flag them where a string was meant (``validate``);
* alias expansion is bounded (``MAX_NODES`` constructed values per document) and
  recursive aliases are refused, so an alias bomb ends in milliseconds;
* explicit tags other than the core ones (``!!python/object``, ``!foo``) are refused,
  and so is a core tag on a value that is not of its type (``!!int abc``, an empty
  ``!!float``): the node keeps its text and gets a ``yaml-tag`` problem;
* nesting is bounded (``MAX_DEPTH`` collections inside one another), below the
  schema validator's own recursion limit, so deep input is one ``yaml-depth``
  problem at the node that went too deep.

File-level problems: unreadable, larger than ``MAX_BYTES``, not UTF-8, empty,
tabs, a syntax error, more than one document, a list or scalar at the top.
No function here raises on bad input: every failure is a ``Problem``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml._yaml import CParser
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from reconciler.config import problems as P
from reconciler.config.problems import Problem

MAX_BYTES = 1024 * 1024
"""Largest monitor or overlay file accepted (1 MiB)."""

MAX_NODES = 10_000
"""Largest number of values one document may construct, aliases expanded: past it,
``yaml-aliases`` when an alias repeated a collection (an alias bomb), else
``too-many-values``."""

MAX_DEPTH = 64
"""Most collections nested inside one another in a document, the top-level mapping
included. A monitor needs about 4; ``jsonschema_rs`` fails on instances nested
past about 250 levels, and Python's recursion limit (1000 frames) must not be
reached while building (two frames per mapping level): 64 stays below both."""

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_TEXT_TAGS = frozenset({_STR, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"})
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_YN = frozenset({"y", "Y", "n", "N"})
_BOOL_TEXT = frozenset({"yes", "no", "true", "false", "on", "off"})
_NULL_TEXT = frozenset({"", "~", "null", "Null", "NULL"})
_TYPE_NAMES = {_INT: "an integer", _FLOAT: "a number", _BOOL: "a boolean", _NULL: "null"}
_CONSTRUCTOR = SafeConstructor()
_IMPLICIT_FIRST = frozenset(k for k in Resolver.yaml_implicit_resolvers if k)
_RESOLVED: dict[str, str] = {}  # plain scalar text -> implicit tag (it depends on the text only)


_SCALAR_NODE, _SEQUENCE_NODE, _MAPPING_NODE = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode
_IMPLICIT: dict[str, list[tuple[str, Any]]] = {
    k: list(v) for k, v in Resolver.yaml_implicit_resolvers.items() if k is not None}


class _Loader(CParser):
    """PyYAML's C parser and composer with the standard YAML 1.1 implicit resolvers
    (``yaml.resolver.Resolver.yaml_implicit_resolvers``; no path resolvers), resolved
    here without ``Resolver``'s per-call overhead: a plain scalar whose first character
    starts no implicit type is a string, other plain scalars are matched once per text
    (cached), collections take the default map/seq tags. Same answers as
    ``Resolver.resolve``."""

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        """No path resolvers are registered: nothing to track (saves a call per node)."""

    def ascend_resolver(self) -> None:
        """See ``descend_resolver``."""

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is not _SCALAR_NODE:
            return _MAP if kind is _MAPPING_NODE else _SEQ
        if not implicit[0] or (value and value[0] not in _IMPLICIT_FIRST):
            return _STR
        tag = _RESOLVED.get(value)
        if tag is None:
            tag = _STR
            for candidate, regexp in _IMPLICIT.get(value[:1], ()):
                if regexp.match(value):
                    tag = candidate
                    break
            if len(value) <= 32 and len(_RESOLVED) < 4096:
                _RESOLVED[value] = tag
        return tag


def _implicit(text: str) -> str:
    """The tag YAML 1.1 gives the plain scalar ``text`` (as ``_Loader.resolve``)."""
    for candidate, regexp in _IMPLICIT.get(text[:1], ()):
        if regexp.match(text):
            return candidate
    return _STR


def _compose(text: str) -> yaml.Node | None:
    loader = _Loader(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    finally:
        loader.dispose()

Path_ = tuple[str | int, ...]

# Line breaks YAML 1.1 (so libyaml's marks) counts that editors and YAML 1.2 do not: a
# lone CR, NEL, LS and PS. A text holding one gets its positions counted by "\n".
_ODD_BREAKS = re.compile("\r(?!\n)|[\x85\u2028\u2029]")


def _at(mark: Any, text: str | None) -> tuple[int, int]:
    """1-based ``(line, col)`` of a libyaml mark. With ``text`` (only passed when it holds
    an odd line break, see ``_ODD_BREAKS``) lines are counted by ``\n`` from the mark's
    character index, as an editor shows them."""
    if text is None:
        return mark.line + 1, mark.column + 1
    index = min(mark.index, len(text))
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1


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


@dataclass(slots=True)
class Document:
    """One parsed YAML mapping with its node graph kept for positions.

    Attributes:
        file: the file name as displayed in problems.
        data: the constructed top-level mapping (str keys; JSON-compatible values
            plus ``float``).
        root: the top-level ``yaml.MappingNode``.
        surprises: YAML 1.1 coercions by instance path.
        text: the source text when it holds a line break only YAML 1.1 counts (a
            lone CR, NEL, LS, PS), so positions are counted by ``\n``; else None.
    """

    file: str
    data: dict[str, Any]
    root: yaml.MappingNode
    surprises: dict[Path_, Surprise] = field(default_factory=dict)
    text: str | None = None

    def node(self, path: Sequence[str | int]) -> tuple[yaml.Node, yaml.Node | None]:
        """Return ``(value_node, key_node)`` for the deepest node along ``path``.

        ``key_node`` is the key of the last mapping step (None at the root or for a
        list item). Stops at the deepest node that exists (a missing key gives its
        parent), so every instance path maps to some position.
        """
        node: yaml.Node = self.root
        key_node: yaml.Node | None = None
        for step in path:
            if isinstance(node, yaml.MappingNode) and isinstance(step, str):
                found = None
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == step:
                        found = (k, v)
                if found is None:
                    break
                key_node, node = found
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if not 0 <= step < len(node.value):
                    break
                node, key_node = node.value[step], None
            else:
                break
        return node, key_node

    def position(self, path: Sequence[str | int], *, key: bool = False) -> tuple[int, int]:
        """1-based ``(line, col)`` of the value at ``path`` (of its key when ``key``)."""
        node, key_node = self.node(path)
        mark = key_node.start_mark if key and key_node is not None else node.start_mark
        return _at(mark, self.text)

    def parent_position(self, path: Sequence[str | int]) -> tuple[int, int]:
        """Position for a problem about the mapping at ``path`` as a whole (a missing
        required key): the line of the key holding it, or the document start."""
        node, key_node = self.node(path)
        return _at((key_node or node).start_mark, self.text)


class _Limit(Exception):
    """A bound was passed: the document is refused as a whole. ``node`` is where, when
    its position means something (aliases have no marks of their own)."""

    def __init__(self, message: str, rule: str, path: Path_,
                 node: yaml.Node | None = None) -> None:
        super().__init__(message)
        self.rule = rule
        self.path = path
        self.node = node


class _Builder:
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
                raise _Limit(f"more than {MAX_NODES} values after expanding aliases "
                             f"(an alias bomb?)", "yaml-aliases", path)
            raise _Limit(f"too many values: more than {MAX_NODES} in one document (lists, "
                         f"mappings and scalars)", "too-many-values", path)
        cls = node.__class__
        if cls is _SCALAR_NODE:
            return self.scalar(node, path)  # type: ignore[arg-type]
        ident = id(node)
        if ident in self.active:
            raise _Limit("recursive alias: a node contains itself", "yaml-aliases", path)
        if ident in self.built:  # a collection built twice: an alias expands it again
            self.aliased = True
        self.built.add(ident)
        if len(path) >= MAX_DEPTH:
            raise _Limit(f"nested deeper than {MAX_DEPTH} levels (lists and mappings inside "
                         f"one another)", "yaml-depth", path, node)
        self.active.add(ident)
        try:
            if cls is _MAPPING_NODE:
                if node.tag != _MAP:
                    self.bad_tag(node, path)
                return self.mapping(node, path)  # type: ignore[arg-type]
            if cls is _SEQUENCE_NODE:
                if node.tag != _SEQ:
                    self.bad_tag(node, path)
                out: list[Any] = []
                append = out.append
                for i, item in enumerate(node.value):
                    if (item.__class__ is _SCALAR_NODE and item.tag == _STR
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
            if key_node.__class__ is not _SCALAR_NODE:
                self.add(key_node, path, "a mapping key must be plain text", "yaml-syntax")
                continue
            if key_node.tag == _MERGE:
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
            if (value_node.__class__ is _SCALAR_NODE and value_node.tag == _STR
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
        sources = source.value if source.__class__ is _SEQUENCE_NODE else [source]
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
        if tag == _NULL:
            if text in _NULL_TEXT:
                return None
            return self.not_of_type(node, path)
        if tag == _BOOL:
            lowered = text.lower()
            if lowered not in _BOOL_TEXT:
                return self.not_of_type(node, path)
            value = lowered in ("yes", "true", "on")
            if plain and lowered not in ("true", "false"):
                self.surprise(node, path, "yaml11-bool", value)
            return value
        if tag in (_INT, _FLOAT):
            try:
                result: Any = (_CONSTRUCTOR.construct_yaml_int(node) if tag == _INT
                               else _CONSTRUCTOR.construct_yaml_float(node))
            except (ValueError, IndexError, OverflowError):
                # "0b_" matches YAML 1.1's int pattern without a digit; a plain one
                # stays text (as YAML 1.2 reads it), an explicit tag is a problem.
                return text if plain and _implicit(text) == tag else self.not_of_type(node,
                                                                                      path)
            if plain and ":" in text:
                self.surprise(node, path, "yaml11-sexagesimal", result)
            elif tag == _INT and plain and _OCTAL.fullmatch(text) and text.strip("+-0_"):
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
        line, col = _at(node.start_mark, self.text)
        self.surprises[path] = Surprise(rule, str(node.value), value, line, col)

    def bad_tag(self, node: yaml.Node, path: Path_) -> None:
        self.add(node, path, f"unsupported YAML tag {node.tag}; use plain values", "yaml-tag")

    def line(self, node: yaml.Node) -> int:
        """The 1-based line of ``node`` (for messages naming another line)."""
        return _at(node.start_mark, self.text)[0]

    def add(self, node: yaml.Node, path: Path_, message: str, rule: str) -> None:
        line, col = _at(node.start_mark, self.text)
        self.problems.append(P.error(self.file, line, col, P.dotted(path), message, rule))


def read(path: Path, *, file: str) -> tuple[bytes | None, list[Problem]]:
    """Read ``path`` as bytes, refusing files over ``MAX_BYTES`` and anything that is
    not a regular file (a directory, or a FIFO that would block forever).

    Returns:
        ``(data, [])`` or ``(None, [problem])`` (unreadable, too large).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return None, [P.error(file, 1, 1, "", f"cannot read: {e.strerror or e}", "unreadable")]
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, [P.error(file, 1, 1, "", "not a regular file", "unreadable")]
        chunks: list[bytes] = []
        size = 0
        # Ask for the size fstat gave (plus one byte, to see a file that grew) rather
        # than MAX_BYTES: os.read allocates the buffer it is asked for.
        want = min(info.st_size, MAX_BYTES) + 1
        while size <= MAX_BYTES:
            chunk = os.read(fd, min(want, MAX_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            want = 64 * 1024
    except OSError as e:
        return None, [P.error(file, 1, 1, "", f"cannot read: {e.strerror or e}", "unreadable")]
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        return None, [P.error(file, 1, 1, "", f"file is larger than {MAX_BYTES} bytes (1 MiB)",
                              "file-too-large")]
    return chunks[0] if len(chunks) == 1 else b"".join(chunks), []


def parse(data: bytes, *, file: str) -> tuple[Document | None, list[Problem]]:
    """Parse one YAML document that must be a mapping.

    Args:
        data: the file's bytes (UTF-8; a BOM is accepted).
        file: the name used in problems.

    Returns:
        ``(document, problems)``; ``document`` is None when no mapping could be
        built (then ``problems`` holds at least one error). Element-level
        problems (duplicate keys, tags) come with a document.
    """
    if len(data) > MAX_BYTES:
        return None, [P.error(file, 1, 1, "", f"file is larger than {MAX_BYTES} bytes (1 MiB)",
                              "file-too-large")]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        return None, [P.error(file, line, col, "",
                              f"not UTF-8 (byte 0x{data[e.start]:02x}); save the file as UTF-8",
                              "encoding")]
    odd = text if _ODD_BREAKS.search(text) else None
    try:
        root = _compose(text)
    except yaml.MarkedYAMLError as e:
        return None, [_syntax(file, text, e, odd)]
    except yaml.reader.ReaderError as e:  # a character YAML does not accept (NUL, ESC)
        line, col = _reader_at(text, e)
        return None, [P.error(file, line, col, "", _reader_message(e), "yaml-syntax")]
    except yaml.YAMLError as e:  # pragma: no cover - every parser error carries a mark
        return None, [P.error(file, 1, 1, "", f"invalid YAML: {e}", "yaml-syntax")]
    except RecursionError:
        return None, [P.error(file, 1, 1, "", "YAML nested too deeply", "yaml-depth")]
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag == _NULL
                        and not root.value):
        return None, [P.error(file, 1, 1, "", "empty file: expected a monitor mapping "
                              "(source:, condition:, action:)", "empty-file")]
    if not isinstance(root, yaml.MappingNode):
        line, col = _at(root.start_mark, odd)
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        return None, [P.error(file, line, col, "",
                              f"the document is {kind}; expected a mapping of fields "
                              f"(one monitor per file)", "top-level")]
    builder = _Builder(file, odd)
    try:
        value = builder.build(root, ())
    except _Limit as e:
        if e.node is not None:
            line, col = _at(e.node.start_mark, odd)
            return None, [P.error(file, line, col, P.dotted(e.path[:1]), str(e), e.rule)]
        # Report at the top-level key being expanded (aliases have no marks of their own).
        line, col = Document(file, {}, root, text=odd).position(e.path[:1], key=True)
        return None, [P.error(file, line, col, P.dotted(e.path[:1]), str(e), e.rule)]
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops nesting well before
        return None, [P.error(file, 1, 1, "", "YAML nested too deeply", "yaml-depth")]
    return Document(file, value, root, builder.surprises, odd), builder.problems


def load(path: Path, *, file: str | None = None) -> tuple[Document | None, list[Problem]]:
    """Read and parse ``path`` (``read`` then ``parse``); never raises on bad input."""
    shown = file if file is not None else str(path)
    data, problems = read(path, file=shown)
    if data is None:
        return None, problems
    return parse(data, file=shown)


def _syntax(file: str, text: str, e: yaml.MarkedYAMLError, odd: str | None) -> Problem:
    mark = e.problem_mark or e.context_mark
    line, col = _at(mark, odd) if mark is not None else (1, 1)
    problem = (e.problem or "invalid YAML").strip()
    lines = text.split("\n")
    if 0 < line <= len(lines) and "\t" in lines[line - 1][: max(col, 1)] and (
        "cannot start any token" in problem or "tab" in problem
    ):
        return P.error(file, line, col, "", "tab character: indent YAML with spaces", "tab")
    if "another document" in problem:
        return P.error(file, line, col, "",
                       "a second YAML document (---): one monitor per file", "yaml-syntax")
    context = f" ({e.context.strip()})" if e.context else ""
    return P.error(file, line, col, "", f"invalid YAML: {problem}{context}", "yaml-syntax")


def plain(text: str, *, file: str) -> Any:
    """Load a YAML text that is not a monitor file (a replay fixture, a generated
    overlay being rewritten) with PyYAML's safe loader, as plain values.

    A boundary: whatever PyYAML raises (a syntax error, a value its constructors
    cannot build such as ``!!bool x``, ``!!timestamp x`` or an empty ``!!int``, a
    character YAML does not accept, nesting past the parser's limit) becomes one
    ``ConfigError`` line, at the node's position when one is known.

    Raises:
        errors.ConfigError: ``file:line:col: invalid YAML: ...`` for a syntax error,
            ``file:line:col: invalid YAML value: !!bool 'x' ...`` for a value that
            cannot be built, ``file: invalid YAML value: <summary>`` without a
            position; never a traceback.
    """
    from reconciler import errors

    try:
        return yaml.load(text, Loader=_PlainLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = _at(mark, None) if mark is not None else (1, 1)
        what = " ".join((e.problem or "invalid YAML").split())
        kind = "invalid YAML value" if isinstance(e, _Unbuildable) else "invalid YAML"
        raise errors.ConfigError(f"{file}:{line}:{col}: {kind}: {what}") from e
    except yaml.reader.ReaderError as e:
        line, col = _reader_at(text, e)
        raise errors.ConfigError(f"{file}:{line}:{col}: {_reader_message(e)}") from e
    except yaml.YAMLError as e:
        raise errors.ConfigError(f"{file}: invalid YAML: {_one_line(e)}") from e
    except Exception as e:  # the boundary: never a traceback
        raise errors.ConfigError(f"{file}: invalid YAML value: {_one_line(e)}") from e


def _reader_at(text: str, e: yaml.reader.ReaderError) -> tuple[int, int]:
    """1-based ``(line, col)`` of the character a ``ReaderError`` names: libyaml gives
    its offset in UTF-8 bytes, the pure-Python reader (``encoding`` "unicode") in
    characters."""
    index = e.position
    if e.encoding != "unicode":
        index = len(text.encode("utf-8", "surrogatepass")[:index].decode("utf-8", "ignore"))
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1


def _reader_message(e: yaml.reader.ReaderError) -> str:
    """One line for a character YAML does not accept (C0 other than tab and line breaks,
    DEL, C1 other than NEL, surrogates, U+FFFE/U+FFFF; YAML 1.1 section 5.1)."""
    char = e.character if isinstance(e.character, int) else ord(str(e.character)[:1] or "?")
    return (f"invalid YAML: unacceptable character U+{char:04X} ({e.reason}); remove it, or "
            f"write it as an escape in a double-quoted string")


def _one_line(e: BaseException) -> str:
    """``e``'s message on one line (at most 200 characters), or its type's name."""
    return " ".join(str(e).split())[:200] or type(e).__name__


class _Unbuildable(yaml.constructor.ConstructorError):
    """A value PyYAML's constructors raised on, with the node's mark."""


class _PlainLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, with any exception raised while building one node turned into
    an ``_Unbuildable`` at that node (the innermost node that failed)."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as e:  # a bad value, or a constructor bug
            if isinstance(node, yaml.ScalarNode):
                short = node.tag.rsplit(":", 1)[-1]
                text = node.value if len(node.value) <= 40 else node.value[:37] + "..."
                what = f"!!{short} {text!r} is not a valid {short}"
            else:
                what = f"cannot build this value: {_one_line(e)}"
            raise _Unbuildable(None, None, what, node.start_mark) from e
