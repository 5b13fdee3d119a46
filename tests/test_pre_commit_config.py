"""The project's own .pre-commit-config.yaml: local hooks running what `make check` runs,
and `monitors lint` on this repository's monitors with the offered hook's file pattern."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.conftest import ROOT


def _hooks() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    [repo] = config["repos"]
    assert repo["repo"] == "local"  # nothing to download: works offline
    return {h["id"]: h for h in repo["hooks"]}


def test_ruff_and_mypy_hooks_run_make_checks_tools() -> None:
    hooks = _hooks()
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "$(BIN)/ruff check" in make and "$(BIN)/mypy" in make
    assert hooks["ruff"]["entry"] == ".venv/bin/ruff check"
    assert hooks["mypy"]["entry"] == ".venv/bin/mypy"
    assert hooks["mypy"]["pass_filenames"] is False  # the whole package, as make check
    assert all(h["language"] == "system" for h in hooks.values())


def test_monitors_lint_hook_covers_this_repositorys_monitors() -> None:
    ours = _hooks()["monitors-lint"]
    offered = {h["id"]: h for h in yaml.safe_load(
        (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}["monitors-lint"]
    assert ours["entry"] == ".venv/bin/monitors lint"
    assert ours["files"] == offered["files"]
    pattern = re.compile(ours["files"])
    own = sorted(p.relative_to(ROOT).as_posix() for d in ("monitors.d", "system")
                 for p in (ROOT / d).rglob("*.y*ml"))
    assert own and all(pattern.search(p) for p in own)
