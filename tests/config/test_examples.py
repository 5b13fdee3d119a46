"""Every file under tests/examples/: its header comment names the expected problems.

``# expect: LINE:COL RULE`` (one or more lines) for invalid examples: each named
problem must be reported at exactly that position; ``# expect: clean`` for valid
examples: no problem at all (not even a warning).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler import settings
from reconciler.config import loader
from reconciler.config.problems import RULES

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECT = re.compile(r"^# expect: (\d+):(\d+) ([a-z0-9-]+)$", re.M)


def _lint(path: Path) -> list[tuple[int, int, str]]:
    cfg = settings.load(root=path.parent)
    result = loader.load(cfg, paths=[path])
    assert all(p.rule in RULES for p in result.problems), "every rule id is documented"
    return [(p.line, p.col, p.rule) for p in result.problems]


@pytest.mark.parametrize("path", sorted((EXAMPLES / "invalid").glob("*.yml")), ids=lambda p: p.name)
def test_invalid_example_reports_expected_problem(path: Path) -> None:
    expected = [(int(a), int(b), rule) for a, b, rule in EXPECT.findall(path.read_text())]
    assert expected, f"{path.name} has no '# expect: LINE:COL RULE' header"
    found = _lint(path)
    for item in expected:
        assert item in found, f"{path.name}: expected {item}, got {found}"


@pytest.mark.parametrize("path", sorted((EXAMPLES / "valid").glob("*.yml")), ids=lambda p: p.name)
def test_valid_example_is_clean(path: Path) -> None:
    assert path.read_text().startswith("# expect: clean")
    assert _lint(path) == []
