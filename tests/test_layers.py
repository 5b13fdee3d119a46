"""Layers import downward only (STYLE.md): a small import-linter over the package's AST.

cli > (render | daemon) > planning > (config | state) > (model, errors, durations,
processes, redaction);
sources, conditions and actions never import each other; click appears only in cli/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reconciler.sources import registry as source_types
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


# The declarative half of the sources package: the registry, the shared field helpers
# and the type modules (spec, normalize, describe, check; runtime imports stay inside
# ``observe``/``stream``). config normalizes and lints through it and state rebuilds a
# typed spec from the running registry with it; ``sources.context`` (httpx) and
# ``sources.process`` (asyncio) are runtime and stay out of reach.
SOURCES_DECLARATIVE = {"reconciler.sources", "reconciler.sources.registry",
                       "reconciler.sources.fields", "reconciler.sources.push",
                       *(m.__name__ for m in source_types.TYPES.values())}  # type: ignore[attr-defined]

# exact modules that may cross a rule above, with the reason
ALLOWED = {
    "reconciler.state.atomic",  # a leaf (os only): config's writer shares atomic writes
    *SOURCES_DECLARATIVE,
}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_respects_the_layers(path: Path) -> None:
    area = _area(path)
    imported = _imports(path)
    if area != "cli":
        assert not any(m == "click" or m.startswith("click.") for m in imported), (
            f"{path.relative_to(ROOT)} imports click outside cli/")
    bad = sorted(
        m for m in imported
        if m.startswith("reconciler.") and m.split(".")[1] in FORBIDDEN.get(area, set())
        and m not in ALLOWED and not any(a.startswith(m + ".") for a in ALLOWED & imported)
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


def _module_level_imports(path: Path) -> set[str]:
    """Imports that run when the module is imported (not inside functions or under
    ``if TYPE_CHECKING``)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


LEAVES = ("reconciler.model", "reconciler.errors", "reconciler.durations",
          "reconciler.redaction")
RUNTIME = ("httpx", "asyncio", "jinja2", "apprise", "jsonschema", "reconciler.processes",
           "reconciler.sources.context", "reconciler.sources.process")


@pytest.mark.parametrize("module", sorted(SOURCES_DECLARATIVE))
def test_source_types_import_only_leaves_at_module_level(module: str) -> None:
    """The declarative half of sources imports leaves and itself only: lint and config
    reach it without httpx or asyncio (the runtime imports sit inside ``observe``)."""
    rel = Path(*module.split(".")[1:])
    path = PACKAGE / rel / "__init__.py" if (PACKAGE / rel).is_dir() else \
        PACKAGE / rel.with_suffix(".py")
    imported = _module_level_imports(path)
    heavy = sorted(m for m in imported if m.split(".")[0] in RUNTIME or m in RUNTIME)
    assert heavy == [], f"{module} imports {heavy} at module level"
    inside = sorted(m for m in imported if m.startswith("reconciler.")
                    and not m.startswith(LEAVES)
                    and not any(m == d or m.startswith(d + ".") for d in SOURCES_DECLARATIVE))
    assert inside == [], f"{module} imports {inside} at module level"


def test_no_module_level_import_cycle_in_sources() -> None:
    """The sources package imports without cycles: the package ``__init__`` imports no
    type module, the type modules never import the registry, and so on."""
    folder = PACKAGE / "sources"
    names = {p.stem: p for p in folder.glob("*.py")}
    graph = {}
    for stem, path in names.items():
        module = "reconciler.sources" if stem == "__init__" else f"reconciler.sources.{stem}"
        found = set()
        for m in _module_level_imports(path):
            parts = m.split(".")
            if parts[:2] != ["reconciler", "sources"]:
                continue
            target = parts[2] if len(parts) > 2 and parts[2] in names else "__init__"
            target_mod = ("reconciler.sources" if target == "__init__"
                          else f"reconciler.sources.{target}")
            if target_mod != module:
                found.add(target_mod)
        graph[module] = found

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"import cycle: {' -> '.join((*stack, node))}"
        for nxt in graph.get(node, ()):
            visit(nxt, (*stack, node))

    for module in graph:
        visit(module, ())


def test_the_sources_package_and_registry_import_light() -> None:
    """Importing the package imports no source module (no cycle through ``__init__``);
    importing the registry, as lint does, imports neither httpx nor asyncio."""
    import subprocess
    import sys

    code = ("import sys, reconciler.sources as s\n"
            "print(sorted(m for m in sys.modules if m.startswith('reconciler.sources.')))\n"
            "import reconciler.sources.registry\n"
            "print(sorted(m for m in ('httpx', 'asyncio') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=True)
    assert done.stdout.splitlines() == ["[]", "[]"]
