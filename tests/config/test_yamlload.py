"""The position-keeping YAML loader: every bad input is a problem with its line, never a raise."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.config import yamlbuild, yamlload


def parse(text: str | bytes) -> tuple[yamlload.Document | None, list[tuple[int, int, str]]]:
    data = text.encode() if isinstance(text, str) else text
    doc, problems = yamlload.parse(data, file="f.yml")
    return doc, [(p.line, p.col, p.rule) for p in problems]


def test_plain_mapping_keeps_positions() -> None:
    doc, problems = parse("a: 1\nb:\n  c: [x, y]\n")
    assert problems == [] and doc is not None
    assert doc.data == {"a": 1, "b": {"c": ["x", "y"]}}
    assert doc.position(("b", "c", 1)) == (3, 10)
    assert doc.position(("b", "c"), key=True) == (3, 3)
    assert doc.parent_position(("b",)) == (2, 1)
    # a missing key maps to the deepest existing node
    assert doc.position(("b", "nope")) == (3, 3)


def test_duplicate_key_is_reported_at_second_occurrence() -> None:
    doc, problems = parse("a: 1\nb: 2\na: 3\n")
    assert problems == [(3, 1, "duplicate-key")]
    assert doc is not None and doc.data["a"] == 3


def test_nested_duplicate_key() -> None:
    _, problems = parse("s:\n  t: 1\n  t: 2\n")
    assert problems == [(3, 3, "duplicate-key")]


@pytest.mark.parametrize(
    ("text", "rule", "value"),
    [
        ("yes", "yaml11-bool", True),
        ("No", "yaml11-bool", False),
        ("on", "yaml11-bool", True),
        ("OFF", "yaml11-bool", False),
        ("y", "yaml11-bool", True),
        ("n", "yaml11-bool", False),
        ("0777", "yaml11-octal", 511),
        ("1:30", "yaml11-sexagesimal", 90),
        ("1:30:00", "yaml11-sexagesimal", 5400),
    ],
)
def test_yaml11_surprises_are_recorded(text: str, rule: str, value: object) -> None:
    doc, problems = parse(f"k: {text}\n")
    assert problems == [] and doc is not None
    s = doc.surprises[("k",)]
    assert (s.rule, s.text, s.line, s.col) == (rule, text, 1, 4)
    assert s.value == value
    assert f"'{text}'" in s.hint()  # says how to quote


@pytest.mark.parametrize("text", ["'yes'", '"0777"', "'1:30'", "true", "false", "0", "10", "0x1F",
                                  "yes-please", "'y'"])
def test_quoted_or_unambiguous_scalars_are_not_surprises(text: str) -> None:
    doc, _ = parse(f"k: {text}\n")
    assert doc is not None and doc.surprises == {}


def test_keys_are_text_never_booleans() -> None:
    doc, _ = parse("on: 1\nyes: 2\n")
    assert doc is not None and doc.data == {"on": 1, "yes": 2}


def test_timestamps_stay_strings() -> None:
    doc, _ = parse("d: 2026-01-01\nt: 2026-01-01T10:00:00Z\n")
    assert doc is not None
    assert doc.data == {"d": "2026-01-01", "t": "2026-01-01T10:00:00Z"}


def test_tab_indentation() -> None:
    assert parse("a:\n\tb: 1\n")[1] == [(2, 1, "tab")]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(text: str) -> None:
    doc, problems = parse(text)
    assert doc is None and problems == [(1, 1, "empty-file")]


@pytest.mark.parametrize(("text", "line"), [("- a\n- b\n", 1), ("just text\n", 1),
                                            ("# c\n42\n", 2)])
def test_top_level_must_be_a_mapping(text: str, line: int) -> None:
    doc, problems = parse(text)
    assert doc is None and problems == [(line, 1, "top-level")]


def test_non_utf8_names_the_line() -> None:
    doc, problems = parse(b"a: 1\nb: caf\xe9\n")
    assert doc is None and problems == [(2, 7, "encoding")]


def test_utf8_bom_is_accepted() -> None:
    doc, problems = parse("\ufeffa: 1\n".encode())
    assert problems == [] and doc is not None and doc.data == {"a": 1}


def test_file_over_one_mib(tmp_path: Path) -> None:
    path = tmp_path / "big.yml"
    path.write_bytes(b"a: " + b"x" * (yamlload.MAX_BYTES + 1) + b"\n")
    doc, problems = yamlload.load(path)
    assert doc is None and [p.rule for p in problems] == ["file-too-large"]


def test_unreadable_paths(tmp_path: Path) -> None:
    doc, problems = yamlload.load(tmp_path)
    assert doc is None and [p.rule for p in problems] == ["unreadable"]
    doc, problems = yamlload.load(tmp_path / "missing.yml")
    assert doc is None and [p.rule for p in problems] == ["unreadable"]


def test_syntax_error_has_position() -> None:
    assert parse("a: [1, 2\nb: 3\n")[1] == [(2, 2, "yaml-syntax")]


def test_second_document_is_refused() -> None:
    assert parse("a: 1\n---\nb: 2\n")[1] == [(2, 1, "yaml-syntax")]


def test_explicit_python_tag_is_refused_not_executed() -> None:
    _, problems = parse("a: !!python/object/apply:os.system ['false']\n")
    assert problems == [(1, 4, "yaml-tag")]


def test_merge_keys_work() -> None:
    doc, problems = parse("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  z: 3\n")
    assert problems == [] and doc is not None
    assert doc.data["m"] == {"x": 1, "y": 2, "z": 3}


@pytest.mark.parametrize(("text", "expected"), [
    # an explicit key beside a merge that also sets it: YAML 1.1 keeps the explicit one
    # silently, so it is a duplicate key (at the explicit key), whichever comes first
    ("m:\n  <<: {match: x}\n  match: y\n", [(3, 3, "duplicate-key")]),
    ("m:\n  match: y\n  <<: {match: x}\n", [(2, 3, "duplicate-key")]),
    # two merged mappings setting one key: the first wins silently
    ("a: &a {k: 1}\nb: &b {k: 2}\nm:\n  <<: [*a, *b]\n", [(4, 3, "duplicate-key")]),
    # two merge keys in one mapping
    ("m:\n  <<: {a: 1}\n  <<: {b: 2}\n", [(3, 3, "duplicate-key")]),
])
def test_merge_key_overridden_is_a_duplicate_key(
        text: str, expected: list[tuple[int, int, str]]) -> None:
    doc, problems = parse(text)
    assert problems == expected, problems
    assert doc is not None


@pytest.mark.parametrize("value", [
    "!!int", "!!int ''", "!!int abc", "!!int 0x", "!!int 1e3", "!!float", "!!float abc",
    "!!float ''", "!<tag:yaml.org,2002:int> 0x", "!<tag:yaml.org,2002:float> .", "!!bool maybe",
    "!!bool", "!!null text", "!<tag:yaml.org,2002:bool> 2",
])
def test_core_tag_with_a_value_of_another_type_is_a_problem(value: str) -> None:
    doc, problems = parse(f"a: {value}\nb: 1\n")
    assert problems == [(1, 4, "yaml-tag")]
    assert doc is not None and doc.data["b"] == 1


@pytest.mark.parametrize(("text", "value"), [
    ("!!int 12", 12), ("!!int '12'", 12), ("!!float 1.5", 1.5), ("!!bool yes", True),
    ("!!null ''", None), ("!!str 12", "12"), ("!<tag:yaml.org,2002:int> 0x1f", 31),
])
def test_core_tag_with_a_value_of_its_type_is_accepted(text: str, value: object) -> None:
    doc, problems = parse(f"a: {text}\n")
    assert problems == [] and doc is not None and doc.data["a"] == value


def test_plain_binary_literal_without_digits_stays_text() -> None:
    # 0b_ matches YAML 1.1's int pattern but holds no digit: PyYAML's int() raises
    doc, problems = parse("a: 0b_\n")
    assert doc is not None and problems == [] and doc.data["a"] == "0b_"


def test_recursive_alias_is_refused() -> None:
    doc, problems = parse("a: &x [1, *x]\n")
    assert doc is None and problems == [(1, 1, "yaml-aliases")]


def test_many_plain_values_are_too_many_values_without_blaming_aliases() -> None:
    """40,000 labels said "after expanding aliases (an alias bomb?)" with no alias."""
    doc, problems = yamlload.parse(
        ("labels:\n" + "".join(f"  - l{i}\n" for i in range(40_000))).encode(), file="f.yml")
    assert doc is None and [(p.line, p.col, p.rule) for p in problems] == [
        (1, 1, "too-many-values")]
    assert "alias" not in problems[0].message and "too many values" in problems[0].message


def test_alias_bomb_ends_fast() -> None:
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        rows.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    start = time.perf_counter()
    doc, problems = parse("\n".join(rows) + "\n")
    elapsed = time.perf_counter() - start
    assert doc is None and [p[2] for p in problems] == ["yaml-aliases"]
    assert elapsed < 1.0  # a bound on a pathological input, not a benchmark


def test_deep_nesting_does_not_raise() -> None:
    doc, problems = parse("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert doc is None or problems == [] or problems[0][2] in ("yaml-syntax", "yaml-aliases")


@pytest.mark.parametrize("depth", [yamlbuild.MAX_DEPTH + 1, 150, 300, 600, 900])
@pytest.mark.parametrize("shape", ["[", "{a: "])
def test_nesting_past_the_limit_is_one_problem_at_its_node(depth: int, shape: str) -> None:
    close = "]" if shape == "[" else "}"
    text = "a: " + shape * depth + "1" + close * depth + "\n"
    doc, problems = parse(text)
    assert doc is None and [p[2] for p in problems] == ["yaml-depth"]
    assert problems[0][0] == 1 and problems[0][1] > 3  # at the node that went too deep


def test_nesting_at_the_limit_is_accepted() -> None:
    depth = yamlbuild.MAX_DEPTH - 1  # the top-level mapping is one level
    doc, problems = parse("a: " + "[" * depth + "]" * depth + "\n")
    assert doc is not None and problems == []


def test_loader_depth_limit_is_below_the_validators() -> None:
    """A document the loader accepts never reaches the schema validator's own
    recursion limit (jsonschema_rs raises ValueError past about 250 levels)."""
    from reconciler.config import schemas

    deepest: object = []
    for _ in range(yamlbuild.MAX_DEPTH):
        deepest = [deepest]
    for kind in ("monitor", "overlay"):
        list(schemas.validator(kind).iter_errors({"labels": {"a": deepest}}))
    too_deep: object = []
    for _ in range(400):
        too_deep = [too_deep]
    with pytest.raises(ValueError, match=r"[Rr]ecursion"):
        list(schemas.validator("monitor").iter_errors({"labels": {"a": too_deep}}))


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.yml"
    os.mkfifo(fifo)
    doc, problems = yamlload.load(fifo)
    assert doc is None and [p.message for p in problems] == ["not a regular file"]


def test_exactly_one_mib_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "edge.yml"
    body = b"a: x\n"
    path.write_bytes(body + b"#" * (yamlload.MAX_BYTES - len(body)))
    doc, problems = yamlload.load(path)
    assert problems == [] and doc is not None and doc.data == {"a": "x"}


@pytest.mark.parametrize("brk", ["\r", "\x85", "\u2028", "\u2029"])
def test_positions_count_lines_as_editors_do(brk: str) -> None:
    """YAML 1.1 (libyaml) also breaks lines at a lone CR, NEL, LS and PS; editors and
    YAML 1.2 do not, so positions are counted by newline."""
    assert parse(f'a: "x{brk}y"\nc: [\n')[1] == [(3, 1, "yaml-syntax")]
    assert parse(f'a: "x{brk}y"\nb: !!int z\n')[1] == [(2, 4, "yaml-tag")]
    assert parse(f"a: 1\nb: x{brk}y\n")[1] == [(3, 1, "yaml-syntax")]  # y: no ':'
    doc, _ = parse(f'a: "x{brk}y"\nb:\n  c: 1\n')
    assert doc is not None and doc.position(("b", "c")) == (3, 6)


def test_windows_line_endings_keep_positions() -> None:
    assert parse("a: 1\r\nb: !!int z\r\n")[1] == [(2, 4, "yaml-tag")]


def test_merge_duplicate_names_the_other_line() -> None:
    _, problems = yamlload.parse(b"m:\n  <<: {match: x}\n  match: y\n", file="f.yml")
    assert [p.format() for p in problems] == [
        "f.yml:3:3: error: m.match: duplicate key 'match': the merge (<<) at line 2 also sets "
        "it; YAML would silently keep this one [duplicate-key]"]


@pytest.mark.parametrize(("text", "line", "col"), [
    ('description: "é\x00b"\n', 1, 16),
    ("a: 1\nb: 'é\x1b[31m'\n", 2, 6),
    ("a: 1\nb: x\x7f\n", 2, 5),
])
def test_an_unacceptable_character_is_one_line_at_its_position(text: str, line: int,
                                                               col: int) -> None:
    """libyaml's ReaderError (a NUL, ESC, DEL) printed two lines, the second ``in
    "<unicode string>", position N``, at 1:1."""
    doc, problems = yamlload.parse(text.encode(), file="f.yml")
    assert doc is None and len(problems) == 1
    p = problems[0]
    assert (p.line, p.col, p.rule) == (line, col, "yaml-syntax")
    assert "\n" not in p.format() and "<unicode string>" not in p.message
    assert p.message.startswith("invalid YAML: unacceptable character U+00")
