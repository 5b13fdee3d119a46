"""TOML with positions: the line and column of every key and value of a TOML text.

``tomllib`` (the standard library's TOML 1.0 reader) gives values but no positions,
and no well-kept Python TOML library exposes them (``tomlkit`` keeps formatting,
not line numbers), so ``scan`` walks the text once with a small scanner that knows
just enough TOML (tables, arrays of tables, dotted and quoted keys, strings of all
four kinds, arrays, inline tables, comments) to tell where each key starts. It
assumes the text already parsed with ``tomllib``: on anything unexpected it stops
and returns what it found, and a path without a position falls back to its
parent's.

``document`` turns a parsed TOML table and its text into a ``yamlload.Document``
(a node graph carrying those positions), so ``validate.check`` reports problems of
``monitors.toml`` exactly as it does for YAML files: ``file:line:col: field: message``
with did-you-mean for unknown keys. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import datetime as dt
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.config.yamlload import Document, Path_

Position = tuple[int, int]
"""1-based ``(line, column)``."""

_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCALAR_END = frozenset(",]}#\r\n")


@dataclass
class Positions:
    """Where each key and value of a TOML text starts.

    Attributes:
        keys: path -> position of its key (``("daemon", "resync")`` -> the ``r``);
            for a table opened by a header, the key's position inside the header.
        values: path -> position of its value (a table header's ``[`` for a table,
            ``[[`` for an element of an array of tables).
    """

    keys: dict[Path_, Position] = field(default_factory=dict)
    values: dict[Path_, Position] = field(default_factory=dict)


class _Stop(Exception):
    """The text is not what the scanner expects (it was not valid TOML)."""


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.n = len(text)
        self.starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]
        self.out = Positions()
        self.aot: dict[Path_, int] = {}  # resolved path of an array of tables -> elements
        self.table: Path_ = ()  # the table the last header opened

    def pos(self, i: int) -> Position:
        line = bisect.bisect_right(self.starts, i) - 1
        return line + 1, i - self.starts[line] + 1

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < self.n else ""

    def blank(self, *, newlines: bool) -> None:
        """Skip spaces, tabs, comments (and newlines when ``newlines``)."""
        while self.i < self.n:
            c = self.text[self.i]
            if c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < self.n and self.text[self.i] != "\n":
                    self.i += 1
            else:
                return

    def run(self) -> Positions:
        try:
            while True:
                self.blank(newlines=True)
                if self.i >= self.n:
                    break
                if self.peek() == "[":
                    self.header()
                else:
                    self.keyval(self.table)
        except (_Stop, IndexError, ValueError):
            pass
        return self.out

    def key(self) -> list[tuple[str, int]]:
        """A dotted key: ``[(part, start index), ...]``."""
        parts: list[tuple[str, int]] = []
        while True:
            self.blank(newlines=False)
            start = self.i
            c = self.peek()
            if c in "\"'":
                end = self.string_end()
                try:
                    parts.append((str(tomllib.loads("k = " + self.text[start:end])["k"]),
                                  start))
                except tomllib.TOMLDecodeError as e:
                    raise _Stop from e
            else:
                while self.i < self.n and self.text[self.i] in _BARE:
                    self.i += 1
                if self.i == start:
                    raise _Stop
                parts.append((self.text[start:self.i], start))
            self.blank(newlines=False)
            if self.peek() != ".":
                return parts
            self.i += 1

    def string_end(self) -> int:
        """Move past the string starting here; return the index after it."""
        q = self.text[self.i]
        if self.text.startswith(q * 3, self.i):
            close = self.i + 3
            while True:
                close = self.text.find(q * 3, close)
                if close < 0:
                    raise _Stop
                if q == '"' and _escaped(self.text, close):
                    close += 1
                    continue
                break
            end = close + 3
            while end < self.n and self.text[end] == q and end - close < 5:
                end += 1  # up to two quotes may end the content: """a""""" is 'a""'
        else:
            close = self.i + 1
            while True:
                close = self.text.find(q, close)
                if close < 0:
                    raise _Stop
                if q == '"' and _escaped(self.text, close):
                    close += 1
                    continue
                break
            end = close + 1
        self.i = end
        return end

    def header(self) -> None:
        start = self.i
        array = self.text.startswith("[[", self.i)
        self.i += 2 if array else 1
        parts = self.key()
        resolved: Path_ = ()
        for k, (name, at) in enumerate(parts):
            resolved = (*resolved, name)
            self.out.keys.setdefault(resolved, self.pos(at))
            self.out.values.setdefault(resolved, self.pos(start))
            last = k == len(parts) - 1
            if resolved in self.aot and not (last and array):
                resolved = (*resolved, self.aot[resolved] - 1)
        if array:
            count = self.aot.get(resolved, 0)
            self.aot[resolved] = count + 1
            resolved = (*resolved, count)
            self.out.values[resolved] = self.pos(start)
        self.i = self.text.index("]", self.i) + (2 if array else 1)
        self.table = resolved

    def keyval(self, table: Path_) -> None:
        parts = self.key()
        path = table
        for name, at in parts:
            path = (*path, name)
            self.out.keys.setdefault(path, self.pos(at))
            self.out.values.setdefault(path, self.pos(at))
        if self.peek() != "=":
            raise _Stop
        self.i += 1
        self.blank(newlines=False)
        self.value(path)

    def value(self, path: Path_) -> None:
        self.out.values[path] = self.pos(self.i)
        c = self.peek()
        if c in "\"'":
            self.string_end()
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self.blank(newlines=True)
                if self.peek() == "]":
                    self.i += 1
                    return
                self.value((*path, index))
                index += 1
                self.blank(newlines=True)
                if self.peek() == ",":
                    self.i += 1
        elif c == "{":
            self.i += 1
            while True:
                self.blank(newlines=True)
                if self.peek() == "}":
                    self.i += 1
                    return
                self.keyval(path)
                self.blank(newlines=True)
                if self.peek() == ",":
                    self.i += 1
        else:
            start = self.i
            while self.i < self.n and self.text[self.i] not in _SCALAR_END:
                self.i += 1
            if self.i == start:
                raise _Stop


def _escaped(text: str, i: int) -> bool:
    """True when the quote at ``text[i]`` follows an odd number of backslashes."""
    k = i - 1
    while k >= 0 and text[k] == "\\":
        k -= 1
    return (i - 1 - k) % 2 == 1


def scan(text: str) -> Positions:
    """Positions of the keys and values of ``text`` (valid TOML; see the module docstring).

    Never raises: what cannot be scanned has no position.
    """
    return _Scanner(text).run()


def plain(value: Any) -> Any:
    """``value`` (a ``tomllib`` result) with dates and times as ISO 8601 text, so a
    JSON Schema validator can read it."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return value


_TAGS = {bool: "bool", int: "int", float: "float"}


def document(data: Mapping[str, Any], text: str | None, *, file: str) -> Document:
    """A ``yamlload.Document`` for a parsed TOML table, positioned by ``text``.

    Args:
        data: the ``tomllib`` result (dates become text, see ``plain``).
        text: the TOML source ``data`` was parsed from, or None (every position 1:1).
        file: the file name shown in problems.
    """
    found = scan(text) if text is not None else Positions()

    def mark(at: Position) -> yaml.Mark:
        return yaml.Mark(file, 0, at[0] - 1, at[1] - 1, None, 0)

    def build(value: Any, path: Path_, at: Position) -> yaml.Node:
        if isinstance(value, dict):
            pairs = []
            for k, v in value.items():
                sub = (*path, k)
                key_at = found.keys.get(sub, at)
                pairs.append((yaml.ScalarNode("tag:yaml.org,2002:str", k,
                                              start_mark=mark(key_at)),
                              build(v, sub, found.values.get(sub, key_at))))
            return yaml.MappingNode("tag:yaml.org,2002:map", pairs, start_mark=mark(at))
        if isinstance(value, list):
            items = [build(v, (*path, i), found.values.get((*path, i), at))
                     for i, v in enumerate(value)]
            return yaml.SequenceNode("tag:yaml.org,2002:seq", items, start_mark=mark(at))
        tag = _TAGS.get(type(value), "str")
        return yaml.ScalarNode(f"tag:yaml.org,2002:{tag}", str(value), start_mark=mark(at))

    tree = plain(data)
    root = build(tree, (), (1, 1))
    assert isinstance(root, yaml.MappingNode)
    return Document(file=file, data=tree, root=root)
