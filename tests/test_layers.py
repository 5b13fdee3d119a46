"""Layers import downward only (STYLE.md): a small import-linter over the package's AST.

cli > (render | daemon) > planning > (config | state) > (model, errors, durations,
processes, redaction);
sources, conditions and actions never import each other; click appears only in cli/;
config reaches actions only through ``actions.registry``, whose type modules import
only leaves at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "reconciler"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _area(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


MODULES = sorted(PACKAGE.rglob("*.py"))

# area -> areas it must never import (directly, at any point in the module)
FORBIDDEN: dict[str, set[str]] = {
    "model": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
              "render", "cli"},
    "errors": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
               "render", "cli"},
    "durations": {"config", "state", "planning", "sources", "conditions", "actions",
                  "daemon", "render", "cli"},
    # a leaf shared by sources (commands, pid), actions (run) and config (add --watch-pid)
    "processes": {"config", "state", "planning", "sources", "conditions", "actions",
                  "daemon", "render", "cli"},
    # the shared redactor: sources, actions, daemon and cli all use it
    "redaction": {"config", "state", "planning", "sources", "conditions", "actions",
                  "daemon", "render", "cli"},
    # config and state are siblings: config may use the leaf state.atomic (see ALLOWED),
    # state may use config to rebuild a Monitor from the running registry
    "config": {"state", "planning", "sources", "conditions", "actions", "daemon", "render",
               "cli"},
    "state": {"planning", "sources", "conditions", "actions", "daemon", "render", "cli"},
    "planning": {"sources", "conditions", "actions", "daemon", "render", "cli"},
    "sources": {"conditions", "actions", "daemon", "render", "cli", "planning"},
    "conditions": {"sources", "actions", "daemon", "render", "cli", "planning"},
    "actions": {"sources", "conditions", "daemon", "render", "cli", "planning"},
    "daemon": {"cli"},
    "render": {"cli", "daemon"},
}


# exact modules that may cross a rule above, with the reason
ALLOWED = {
    "reconciler.state.atomic",  # a leaf (os only): config's writer shares atomic writes
}

# area -> exact modules it alone may import across a rule above, with the reason
ALLOWED_IN: dict[str, set[str]] = {
    # config normalizes, checks, orders and lists actions through the action registry,
    # whose type modules import only leaves at module level (test below)
    "config": {"reconciler.actions.registry"},
}

# The declarative half of the action types: what ``actions.registry`` loads (and so
# what lint loads). At module level these import only the stdlib, leaves and each
# other; runtime parts (asyncio, httpx, Jinja2, Apprise, the store, the dispatcher)
# are imported inside ``fire`` or under TYPE_CHECKING.
ACTION_TYPES = ("registry", "common", "options", "agents", "run", "routine", "notify",
                "webhook_out")
LEAVES = {"reconciler", "reconciler.model", "reconciler.errors", "reconciler.durations",
          "reconciler.redaction", "reconciler.events"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_the_layers(path: Path) -> None:
    area = _area(path)
    imported = _imports(path)
    if area != "cli":
        assert not any(m == "click" or m.startswith("click.") for m in imported), (
            f"{path.relative_to(ROOT)} imports click outside cli/")
    allowed = ALLOWED | ALLOWED_IN.get(area, set())
    bad = sorted(
        m for m in imported
        if m.startswith("reconciler.") and m.split(".")[1] in FORBIDDEN.get(area, set())
        and m not in allowed and not any(a.startswith(m + ".") for a in allowed & imported)
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


def _module_level_imports(path: Path) -> set[str]:
    """Imports outside functions and ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


@pytest.mark.parametrize("name", ACTION_TYPES)
def test_action_type_modules_import_only_leaves_at_module_level(name: str) -> None:
    declarative = {f"reconciler.actions.{n}" for n in ACTION_TYPES} | {"reconciler.actions"}
    imported = _module_level_imports(PACKAGE / "actions" / f"{name}.py")
    bad = sorted(m for m in imported
                 if (m.split(".")[0] in ("reconciler", "httpx", "jinja2", "apprise", "asyncio")
                     and m not in LEAVES | declarative))
    assert bad == [], f"reconciler/actions/{name}.py imports {bad} at module level"


def test_every_action_type_module_is_checked() -> None:
    from reconciler.actions import registry

    assert {m.__name__.rsplit(".", 1)[1] for m in registry.TYPES.values()} <= set(ACTION_TYPES)
