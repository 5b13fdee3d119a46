"""Property-based fuzzing of the config stage (issue 9 §1): one file never takes the others down.

Mutations of the valid examples (tests/examples/valid, the shipped monitors, an
overlay) with explicit tags, anchors and aliases, merge keys, deep nesting, YAML 1.1
traps, unicode and control bytes, truncation and line edits are loaded beside a good
monitor. For every one: nothing raises, no ``internal-error`` (that boundary is the
last resort, so reaching it is a bug to fix), the good monitor still loads, every
problem has its file, a line and column inside the file and a documented rule, no
example takes more than a few seconds, and ``monitors lint`` and ``plan`` never
exit 3.

``make test`` runs the ``default`` profile (a few seconds); ``make fuzz`` runs the
``fuzz`` profile (``HYPOTHESIS_PROFILE=fuzz``, tens of thousands of examples; both
profiles are registered in tests/conftest.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reconciler import settings as config_settings
from reconciler.actions import checks
from reconciler.config import files, loader
from reconciler.config.problems import RULES
from tests.conftest import ROOT, Repo, run_cli

EXAMPLES = ROOT / "tests" / "examples" / "valid"
OVERLAY = ("monitor: other\npause:\n  reason: flaky runner\n  until: 2026-12-01T09:00:00Z\n"
           "  author: someone\npin:\n  devices: [box-a, box-b]\n")
SEEDS: list[tuple[str, str]] = [
    (f"monitors.d/{p.name}", p.read_text(encoding="utf-8"))
    for p in sorted([*EXAMPLES.glob("*.yml"), *(ROOT / "monitors.d").glob("*.yml"),
                     *(ROOT / "system").glob("*.yml")])
] + [("monitors.d/overlays/other.yml", OVERLAY)]
"""``(where the mutated file goes, its text)``: named after the seed, so it is valid
until mutated."""
GOOD = "source: {type: file, path: /fuzz/good}\naction: {type: notify}\n"
OTHER = "source: {type: file, path: /fuzz/other}\naction: {type: notify}\n"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

TAGS = ["!!int", "!!float", "!!bool", "!!null", "!!str", "!!map", "!!seq", "!!timestamp",
        "!!binary", "!!set", "!!omap", "!!merge", "!<tag:yaml.org,2002:int>",
        "!<tag:yaml.org,2002:float>", "!<tag:yaml.org,2002:bool>", "!<tag:yaml.org,2002:str>",
        "!<tag:yaml.org,2002:null>", "!!python/object:os.system", "!custom", "!", "!<!>",
        "!!python/name:builtins.int"]
TRAPS = ["yes", "no", "on", "off", "y", "n", "Y", "NO", "0777", "0o17", "0x1f", "0b101",
         "0b_", "0x_", "1:30", "190:20:30", "1_000", "~", "null", "", ".nan", ".inf",
         "-.inf", "1e3", "1.5", "6.8523015e+5", "2026-01-01", "2001-12-14t21:59:43.10-05:00",
         "=", "<<", "'", '"', "[", "{", "}", "- x", "? x", "x: y", "|", ">", "@x", "`x",
         "%x", "#", "9" * 400, "-" + "9" * 5000, "1" + "0" * 309 + ".0", "\\", "a\\nb"]
CHARS = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\xa0",
         "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\u200b", "\t", "\r", "\r\n",
         "é", "😀", "\U0010ffff", "\udcff", "\udcc3", "\udce2\udc82", "#", ":", "-", "*",
         "&", "!", "|", ">", "'", '"', "{", "[", ",", "?", "%", "@", "`", " ", "\n"]
KEY_VALUE = re.compile(r"^(\s*(?:-\s+)?[^\s:#'\"][^:#]*?:)(?:[ \t]+(.*))?$")

Draw = Callable[..., object]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _values(lines: list[str]) -> list[int]:
    """Indices of ``key: value`` lines (value possibly empty)."""
    return [i for i, line in enumerate(lines) if KEY_VALUE.match(line)]


def _set_value(lines: list[str], i: int, value: str) -> None:
    m = KEY_VALUE.match(lines[i])
    assert m is not None
    lines[i] = f"{m.group(1)} {value}"


def _value(lines: list[str], i: int) -> str:
    m = KEY_VALUE.match(lines[i])
    return (m.group(2) or "") if m else ""


def _pick(draw: st.DrawFn, lines: list[str]) -> int | None:
    found = _values(lines)
    return draw(st.sampled_from(found)) if found else None


def tag(draw: st.DrawFn, lines: list[str]) -> None:
    """An explicit tag before a value, or alone (empty value)."""
    i = _pick(draw, lines)
    if i is not None:
        value = draw(st.sampled_from([_value(lines, i), "", *TRAPS[:20]]))
        _set_value(lines, i, f"{draw(st.sampled_from(TAGS))} {value}".rstrip())


def trap(draw: st.DrawFn, lines: list[str]) -> None:
    """A YAML 1.1 trap or a syntax character as a value."""
    i = _pick(draw, lines)
    if i is not None:
        _set_value(lines, i, draw(st.sampled_from(TRAPS)))


def deep(draw: st.DrawFn, lines: list[str]) -> None:
    """A value nested in flow or block collections, around the depth limits."""
    i = _pick(draw, lines)
    if i is None:
        return
    n = draw(st.sampled_from([2, 10, 62, 63, 64, 65, 100, 127, 200, 250, 260, 300, 499,
                              600, 999, 1000, 1001, 1500]))
    style = draw(st.sampled_from(["seq", "map", "mixed", "block"]))
    if style == "seq":
        _set_value(lines, i, "[" * n + "x" + "]" * n)
    elif style == "map":
        _set_value(lines, i, "{a: " * n + "x" + "}" * n)
    elif style == "mixed":
        _set_value(lines, i, "[{a: " * (n // 2) + "x" + "}]" * (n // 2))
    else:
        _set_value(lines, i, "")
        indent = len(lines[i]) - len(lines[i].lstrip())
        lines[i + 1:i + 1] = [" " * (indent + 2 + 2 * k) + f"k{k}:" for k in range(min(n, 300))]


def alias(draw: st.DrawFn, lines: list[str]) -> None:
    """An anchor on one value and an alias to it (or to nothing, or to itself) on another."""
    found = _values(lines)
    if not found:
        return
    a, b = draw(st.sampled_from(found)), draw(st.sampled_from(found))
    anchor = draw(st.sampled_from(["a", "b", "x" * 50]))
    _set_value(lines, a, f"&{anchor} {_value(lines, a)}".rstrip())
    target = draw(st.sampled_from([anchor, "missing"]))
    if a == b:
        _set_value(lines, a, f"&{anchor} [*{target}]")
    else:
        _set_value(lines, b, f"*{target}")


def merge(draw: st.DrawFn, lines: list[str]) -> None:
    """A merge key (<<) beside keys it may override, or merging something odd."""
    keys = [m.group(1).strip().lstrip("- ").rstrip(":") for line in lines
            if (m := KEY_VALUE.match(line))] or ["x"]
    key = draw(st.sampled_from(keys))
    value = draw(st.sampled_from([f"{{{key}: x}}", "*a", "[*a, *b]", "[{a: 1}, {a: 2}]",
                                  "5", "[1, 2]", "", f"{{<<: {{{key}: y}}}}", "!!str x",
                                  "{match: x, mode: match}"]))
    i = draw(st.integers(0, len(lines)))
    indent = 0
    if i < len(lines) and lines[i].strip():
        indent = len(lines[i]) - len(lines[i].lstrip())
    lines.insert(i, " " * indent + f"<<: {value}")


def char(draw: st.DrawFn, lines: list[str]) -> None:
    """A unicode or control character (or a raw non-UTF-8 byte) anywhere."""
    text = "\n".join(lines)
    pos = draw(st.integers(0, len(text)))
    c = draw(st.sampled_from(CHARS) | st.characters(codec="utf-8") | st.text(max_size=4))
    new = text[:pos] + c + text[pos:]
    lines[:] = _lines(new)


def truncate(draw: st.DrawFn, lines: list[str]) -> None:
    """The file cut anywhere (a partial write)."""
    text = "\n".join(lines)
    lines[:] = _lines(text[:draw(st.integers(0, len(text)))])


def line_edit(draw: st.DrawFn, lines: list[str]) -> None:
    """A line deleted, duplicated, indented, dedented, or a document marker inserted."""
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    op = draw(st.sampled_from(["delete", "duplicate", "indent", "dedent", "marker"]))
    if not lines:
        return
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "indent":
        lines[i] = "  " + lines[i]
    elif op == "dedent":
        lines[i] = lines[i].lstrip()
    else:
        lines.insert(i, draw(st.sampled_from(["---", "...", "%YAML 1.1", "%TAG ! tag:x,2000:",
                                              "--- !!map", "? complex", "%YAML 1.2\n---"])))


# The mutations that keep most of a file parseable come twice, so that more examples
# reach the schema, semantic and resolve stages than stop at a syntax error.
MUTATIONS = [tag, tag, trap, trap, deep, alias, alias, merge, merge, char, truncate, line_edit]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """``(path below the repository, bytes)``: a valid seed file after one to four
    mutations."""
    where, text = draw(st.sampled_from(SEEDS))
    lines = _lines(text)
    for _ in range(draw(st.integers(1, 4))):
        draw(st.sampled_from(MUTATIONS))(draw, lines)
    return where, "\n".join(lines).encode("utf-8", "surrogateescape")


def _repo(root: Path) -> Repo:
    """A repository with two good monitors (``good``, ``other``) and a channel."""
    (root / "monitors.d" / "overlays").mkdir(parents=True)
    repo = Repo(root)
    repo.write("monitors.d/good.yml", GOOD)
    repo.write("monitors.d/other.yml", OTHER)
    repo.write("monitors.toml", "[channels.ops]\nurl = 'json://localhost'\n"
               "[routines.triage]\nargv = ['true']\n")
    return repo


def _write(repo: Repo, where: str, data: bytes) -> Path:
    """Write the mutated file at ``where``, removing the one of the previous example."""
    for directory in (repo.user, repo.overlays):
        for stale in directory.glob("*.yml"):
            if stale.name not in ("good.yml", "other.yml") or directory == repo.overlays:
                stale.unlink()
    target = repo.root / where
    target.write_bytes(data)
    return target


def _check_problems(result: loader.LoadResult, target: Path, data: bytes) -> None:
    allowed = {files.display(target), files.display(target.resolve())}
    lines = data.count(b"\n") + 1
    for p in result.problems:
        where = f"{p.format()}\n--- file ---\n{data[:2000]!r}"
        assert p.rule != "internal-error", where
        assert p.rule in RULES, where
        assert p.file in allowed, where
        assert 1 <= p.line <= lines + 1 and p.col >= 1, where
    assert "good" in result.monitors, result.problems


def _shared_repo(factory: pytest.TempPathFactory) -> Repo:
    """One repository for all examples of a test run (``_write`` replaces the mutated file)."""
    root = factory.getbasetemp() / "fuzz-repo"
    return Repo(root) if root.exists() else _repo(root)


@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=mutated())
@pytest.mark.timeout(0)  # bounded by the profile's max_examples and deadline instead
def test_mutated_files_never_take_the_others_down(
        tmp_path_factory: pytest.TempPathFactory, case: tuple[str, bytes]) -> None:
    repo = _shared_repo(tmp_path_factory)
    cfg = config_settings.load(root=repo.root)
    check_actions, problems = checks.bound(cfg)
    assert problems == [] and check_actions is not None
    where, data = case
    target = _write(repo, where, data)
    result = loader.load(cfg, now=NOW, action_check=check_actions)
    _check_problems(result, target, data)
    for rule in sorted({p.rule for p in result.problems}) or ["clean"]:
        event(rule)  # pytest --hypothesis-show-statistics shows what the examples reached


@settings(max_examples=max(10, settings.default.max_examples // 6),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=mutated())
@pytest.mark.timeout(0)
def test_mutated_files_never_make_lint_or_plan_exit_3(
        tmp_path_factory: pytest.TempPathFactory, case: tuple[str, bytes]) -> None:
    repo = _shared_repo(tmp_path_factory)
    where, data = case
    _write(repo, where, data)
    for args in (["lint"], ["lint", "--format", "json"], ["plan"]):
        result = run_cli(args, repo=repo)  # fails the test on exit 3
        assert result.exit_code in (0, 1), result.output
