"""YAML with positions and without silent type changes (DESIGN.md §3, step 1).

Parsing uses PyYAML's C composer (``yamlnodes``: ``CParser`` with YAML 1.1's
resolvers), which gives a node graph with line/column marks; we construct plain
Python values from it ourselves (``yamlbuild``) so that:

* a duplicate key in a mapping is a problem (PyYAML keeps the last one silently),
  and so is a key that a merge (``<<``, YAML 1.1's merge key type) would set while
  the mapping, or an earlier merged mapping, also sets it (YAML 1.1 keeps one of
  them silently); merge keys otherwise work;
* mapping keys are the key's text (``on:`` stays ``"on"``, never ``True``);
* timestamps stay strings (no ``datetime``), binary stays text;
* YAML 1.1 coercions of plain scalars (``yes/no/on/off`` -> bool, ``0777`` ->
  octal, ``1:30`` -> base 60) are recorded as ``Surprise`` entries, so the
  validator can flag them where a string was meant (``validate``);
* alias expansion is bounded (``yamlbuild.MAX_NODES`` constructed values per document) and
  recursive aliases are refused, so an alias bomb ends in milliseconds;
* explicit tags other than the core ones (``!!python/object``, ``!foo``) are refused,
  and so is a core tag on a value that is not of its type (``!!int abc``, an empty
  ``!!float``): the node keeps its text and gets a ``yaml-tag`` problem;
* nesting is bounded (``yamlbuild.MAX_DEPTH`` collections inside one another), below the
  schema validator's own recursion limit, so deep input is one ``yaml-depth``
  problem at the node that went too deep.

File-level problems: unreadable, larger than ``MAX_BYTES``, not UTF-8, empty,
tabs, a syntax error, more than one document, a list or scalar at the top.
No function here raises on bad input: every failure is a ``Problem`` (``plain``, for
texts that are not monitor files, raises one ``ConfigError`` line instead).

This module is the entry point: reading with bounds, the ``Document`` with its
positions, and turning PyYAML's errors into problems. Must not: build values itself
(``yamlbuild``), validate against the schema (``validate``) or print.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconciler.config import problems as P
from reconciler.config import yamlbuild, yamlnodes
from reconciler.config.problems import Problem
from reconciler.config.yamlbuild import Surprise
from reconciler.config.yamlnodes import Path_ as Path_  # re-exported (validate, tomlpos)

MAX_BYTES = 1024 * 1024
"""Largest monitor or overlay file accepted (1 MiB)."""


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
        return yamlnodes.at(mark, self.text)

    def parent_position(self, path: Sequence[str | int]) -> tuple[int, int]:
        """Position for a problem about the mapping at ``path`` as a whole (a missing
        required key): the line of the key holding it, or the document start."""
        node, key_node = self.node(path)
        return yamlnodes.at((key_node or node).start_mark, self.text)


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
    body = data[3:] if data.startswith(codecs.BOM_UTF8) else data  # "utf-8-sig", in C
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:  # e.start counts from the end of a BOM, as utf-8-sig's
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        return None, [P.error(file, line, col, "",
                              f"not UTF-8 (byte 0x{data[e.start]:02x}); save the file as UTF-8",
                              "encoding")]
    odd = text if yamlnodes.odd_breaks(text) else None
    try:
        root = yamlnodes.compose(text)
    except yaml.MarkedYAMLError as e:
        return None, [_syntax(file, text, e, odd)]
    except yaml.reader.ReaderError as e:  # a character YAML does not accept (NUL, ESC)
        line, col = _reader_at(text, e)
        return None, [P.error(file, line, col, "", _reader_message(e), "yaml-syntax")]
    except yaml.YAMLError as e:  # pragma: no cover - every parser error carries a mark
        return None, [P.error(file, 1, 1, "", f"invalid YAML: {e}", "yaml-syntax")]
    except RecursionError:
        return None, [P.error(file, 1, 1, "", "YAML nested too deeply", "yaml-depth")]
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag == yamlnodes.NULL
                        and not root.value):
        return None, [P.error(file, 1, 1, "", "empty file: expected a monitor mapping "
                              "(source:, condition:, action:)", "empty-file")]
    if not isinstance(root, yaml.MappingNode):
        line, col = yamlnodes.at(root.start_mark, odd)
        kind = "a list" if isinstance(root, yaml.SequenceNode) else "a single value"
        return None, [P.error(file, line, col, "",
                              f"the document is {kind}; expected a mapping of fields "
                              f"(one monitor per file)", "top-level")]
    builder = yamlbuild.Builder(file, odd)
    try:
        value = builder.build(root, ())
    except yamlbuild.Limit as e:
        if e.node is not None:
            line, col = yamlnodes.at(e.node.start_mark, odd)
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
    line, col = yamlnodes.at(mark, odd) if mark is not None else (1, 1)
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
        line, col = yamlnodes.at(mark, None) if mark is not None else (1, 1)
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
