"""Layers import downward only (STYLE.md): a small import-linter over the package's AST.

cli > client > (render | daemon) > snapshot > planning > (config | state) > (model, errors,
durations, processes, redaction);
client/ (the CLI's side of the daemon) imports of daemon/ only the control protocol and
the start report, never the daemon's internals;
sources, conditions and actions never import each other; click appears only in cli/.
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
    "daemon": {"cli", "client"},
    "render": {"cli", "daemon", "client"},
    # snapshot: the I/O half of planning (layers, fleet, git -> plan inputs)
    "snapshot": {"daemon", "client", "render", "cli"},
    "client": {"cli"},
}

# upper areas -> the only areas that may import them (the lower ones above never do)
IMPORTED_ONLY_BY: dict[str, set[str]] = {
    "client": {"cli"},
    "snapshot": {"client", "daemon", "cli"},
}

# what client/ may use of daemon/: the wire, not the process
CLIENT_MAY_USE = {"reconciler.daemon.protocol", "reconciler.daemon.startreport"}


# exact modules that may cross a rule above, with the reason
ALLOWED = {
    "reconciler.state.atomic",  # a leaf (os only): config's writer shares atomic writes
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
        and not any(m.startswith(a + ".") for a in ALLOWED)
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_upper_areas_are_imported_only_from_above(path: Path) -> None:
    area = _area(path)
    imported = _imports(path)
    bad = sorted(
        m for m in imported
        if m.startswith("reconciler.") and m.split(".")[1] in IMPORTED_ONLY_BY
        and m not in ALLOWED and not any(a.startswith(m + ".") for a in ALLOWED & imported)
        and not any(m.startswith(a + ".") for a in ALLOWED)
        and m.split(".")[1] != area and area not in IMPORTED_ONLY_BY[m.split(".")[1]]
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


@pytest.mark.parametrize("path", [p for p in MODULES if _area(p) == "client"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_client_uses_only_the_daemons_protocol(path: Path) -> None:
    bad = sorted(m for m in _imports(path)
                 if m.startswith("reconciler.daemon.") and m not in CLIENT_MAY_USE)
    assert bad == [], f"{path.relative_to(ROOT)} imports the daemon's internals {bad}"
