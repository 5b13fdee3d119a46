"""Layers import downward only (STYLE.md): a small import-linter over the package's AST.

cli > (render | daemon) > planning > (config | state) > (model, errors, durations,
processes, redaction);
sources, conditions and actions never import each other; click appears only in cli/.
The declarative half of a type package (its spec and registry: pure, no runtime
dependency) may be imported by the layers that normalize, store, plan and show monitors;
a type module imports at module level only the leaves and its own package, without
cycles; ``model`` names the typed specs for annotations only (``TYPE_CHECKING``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "reconciler"


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and (
        node.test.id == "TYPE_CHECKING")


def _walk(node: ast.AST, *, typing: bool, top: bool) -> list[ast.AST]:
    """Nodes under ``node``: without the ``if TYPE_CHECKING:`` blocks unless ``typing``
    (then only inside them), and without function bodies when ``top``."""
    out: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if _is_type_checking(child):
            if typing:
                out.extend(ast.walk(child))
            continue
        if top and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not typing:
            out.append(child)
        out.extend(_walk(child, typing=typing, top=top))
    return out


def _imports(path: Path, *, runtime: bool = False, typing: bool = False,
             top: bool = False) -> set[str]:
    """Modules ``path`` imports (absolute imports; ``from m import n`` gives m and m.n):
    all of them, or those outside ``TYPE_CHECKING`` (``runtime``), or only those inside
    (``typing``); ``top`` leaves out imports inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    nodes = _walk(tree, typing=typing, top=top) if runtime or typing or top else ast.walk(tree)
    for node in nodes:
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
    # position-free lint findings: what type modules' checks return (config places them)
    "findings": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
                 "render", "cli"},
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

# the declarative half of the condition modes (typed spec, registry: describe, check):
# pure, imports no runtime dependency; normalize, lint, the writer, the running registry,
# the diff and the views use it
DECLARATIVE = {"reconciler.conditions.spec", "reconciler.conditions.registry"}
DECLARATIVE_USERS = {"config", "state", "planning"}

# modules model may name for annotations only (inside ``if TYPE_CHECKING:``)
MODEL_TYPES = {"reconciler.conditions.spec", "reconciler.conditions.spec.Condition"}

LEAVES = {"model", "errors", "durations", "redaction", "processes", "findings"}
"""What a type module may import at module level besides its own package and stdlib."""


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_the_layers(path: Path) -> None:
    area = _area(path)
    imported = _imports(path, runtime=area == "model")
    if area in DECLARATIVE_USERS:
        declarative = {m for m in imported
                       if any(m == d or m.startswith(d + ".") for d in DECLARATIVE)}
        # ``from reconciler.conditions import spec`` also names the package
        parents = {d.rsplit(".", 1)[0] for d in DECLARATIVE if d in declarative}
        imported = imported - declarative - parents
    if area != "cli":
        assert not any(m == "click" or m.startswith("click.") for m in imported), (
            f"{path.relative_to(ROOT)} imports click outside cli/")
    bad = sorted(
        m for m in imported
        if m.startswith("reconciler.") and m.split(".")[1] in FORBIDDEN.get(area, set())
        and m not in ALLOWED and not any(a.startswith(m + ".") for a in ALLOWED & imported)
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


def test_model_names_typed_specs_only_for_annotations() -> None:
    typed = {m for m in _imports(PACKAGE / "model.py", typing=True) if m.startswith("reconciler.")}
    assert typed <= MODEL_TYPES, typed


@pytest.mark.parametrize("path", sorted((PACKAGE / "conditions").glob("*.py")),
                         ids=lambda p: p.name)
def test_condition_modules_import_only_leaves_at_module_level(path: Path) -> None:
    allowed = {f"reconciler.{leaf}" for leaf in LEAVES}
    bad = sorted(m for m in _imports(path, runtime=True, top=True)
                 if m.startswith("reconciler.") and m != "reconciler.conditions"
                 and not m.startswith("reconciler.conditions.")
                 and not any(m == a or m.startswith(a + ".") for a in allowed))
    assert bad == [], f"{path.name} imports {bad} at module level"


def _module_graph(package: str) -> dict[str, set[str]]:
    """Module-level import edges between the modules of ``package``: ``from p import m``
    of a submodule ``m`` is an edge to ``p.m``, of a name defined in ``p`` one to ``p``."""
    pkg = f"reconciler.{package}"
    files = {pkg if p.stem == "__init__" else f"{pkg}.{p.stem}": p
             for p in (PACKAGE / package).glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        edges: set[str] = set()
        for node in _walk(ast.parse(path.read_text(encoding="utf-8")), typing=False, top=True):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in files)
            elif isinstance(node, ast.ImportFrom) and node.module in files:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges.add(sub if sub in files else node.module)
        graph[name] = edges - {name}
    return graph


@pytest.mark.parametrize("package", ["conditions"])
def test_no_module_level_import_cycles(package: str) -> None:
    graph = _module_graph(package)
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"import cycle: {' -> '.join((*stack, node))}"
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, (*stack, node))
        done.add(node)

    for node in sorted(graph):
        visit(node, ())
