"""Layers import downward only (STYLE.md): a small import-linter over the package's AST.

cli > server > client > (render | daemon) > snapshot > planning > (config | state) > (model, errors,
durations, processes, redaction, atomic);
config and state never import each other; server/ (the daemon's HTTP face) is imported
by cli only (``monitors run`` attaches it to the daemon);
client/ (the CLI's side of the daemon) imports of daemon/ only the control protocol and
the start report, never the daemon's internals;
sources, conditions and actions never import each other; click appears only in cli/.
The declarative half of a type package (its spec and registry: pure, no runtime
dependency) may be imported by the layers that normalize, store, plan and show monitors;
a type module imports at module level only the leaves and its own package, without
cycles; ``model`` names the typed specs for annotations only (``TYPE_CHECKING``);
config and state reach actions only through their declarative half (``actions.registry``
and the type modules it loads), which imports only leaves at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reconciler.sources import registry as source_types
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
    # how `monitors add` asks for a type: sources, conditions and actions declare one
    "addflags": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
                 "render", "cli"},
    # the registries' lazy type tables (sources, actions)
    "typetable": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
                  "render", "cli"},
    # the shared redactor: sources, actions, daemon and cli all use it
    "redaction": {"config", "state", "planning", "sources", "conditions", "actions",
                  "daemon", "render", "cli"},
    # atomic writes and the JSON encodings: shared by config, state and the layers above
    "atomic": {"config", "state", "planning", "sources", "conditions", "actions", "daemon",
               "render", "cli"},
    # UTC timestamps as text: state records, actions, the daemon and config write them
    "timestamps": {"config", "state", "planning", "sources", "conditions", "actions",
                   "daemon", "render", "cli"},
    # config and state are siblings: neither imports the other (both use the leaf atomic)
    "config": {"state", "planning", "sources", "conditions", "actions", "daemon", "render",
               "cli"},
    "state": {"config", "planning", "sources", "conditions", "actions", "daemon", "render", "cli"},
    "planning": {"sources", "conditions", "actions", "daemon", "render", "cli"},
    "sources": {"conditions", "actions", "daemon", "render", "cli", "planning"},
    "conditions": {"sources", "actions", "daemon", "render", "cli", "planning"},
    "actions": {"sources", "conditions", "daemon", "render", "cli", "planning"},
    "daemon": {"cli", "client"},
    "render": {"cli", "daemon", "client"},
    # snapshot: the I/O half of planning (layers, fleet, git -> plan inputs)
    "snapshot": {"daemon", "client", "render", "cli"},
    "client": {"cli", "server", "mcpserver"},
    # the MCP server for agents (``monitors mcp``): above client, below cli
    "mcpserver": {"cli", "server"},
    # the daemon's HTTP server: above daemon and client, below cli
    "server": {"cli"},
    # how to reach a fleet peer (URL, TLS trust): the fleet client and the device source
    "fleetlink": {"config", "state", "planning", "sources", "conditions", "actions",
                  "daemon", "render", "cli", "client", "server"},
    # the API token: read by the server and the fleet client, written by `token create`
    "tokens": {"state", "planning", "sources", "conditions", "actions", "daemon", "render",
               "cli", "client", "server"},
}

# upper areas -> the only areas that may import them (the lower ones above never do)
IMPORTED_ONLY_BY: dict[str, set[str]] = {
    "client": {"cli", "server", "mcpserver"},
    "server": {"cli"},
    "mcpserver": {"cli"},
    "snapshot": {"client", "daemon", "cli"},
}

# what client/ may use of daemon/: the wire, not the process
CLIENT_MAY_USE = {"reconciler.daemon.protocol", "reconciler.daemon.startreport"}


# the declarative half of the condition modes (typed spec, registry: describe, check):
# pure, imports no runtime dependency; normalize, lint, the writer, the running registry,
# the diff and the views use it; ``baseline`` compares two specs (the plan's "baseline
# kept" / "new baseline")
CONDITIONS_DECLARATIVE = {"reconciler.conditions.spec", "reconciler.conditions.registry",
                          "reconciler.conditions.baseline", "reconciler.conditions.lifecycle"}
DECLARATIVE_USERS = {"config", "state", "planning"}

# modules model may name for annotations only (inside ``if TYPE_CHECKING:``)
MODEL_TYPES = {"reconciler.conditions.spec", "reconciler.conditions.spec.Condition",
               "reconciler.conditions.lifecycle", "reconciler.conditions.lifecycle.Lifecycle"}

LEAVES = {"model", "errors", "durations", "redaction", "processes", "findings", "addflags",
          "typetable"}
"""What a type module may import at module level besides its own package and stdlib."""

# The declarative half of the sources package: the registry, the shared field helpers
# and the type modules (spec, normalize, describe, check; runtime imports stay inside
# ``observe``/``stream``). config normalizes and lints through it and state rebuilds a
# typed spec from the running registry with it; ``sources.context`` (httpx) and
# ``sources.process`` (asyncio) are runtime and stay out of reach.
SOURCES_DECLARATIVE = {"reconciler.sources", "reconciler.sources.registry",
                       "reconciler.sources.fields", "reconciler.sources.push",
                       *(m.__name__ for m in source_types.TYPES.values())}  # type: ignore[attr-defined]

# The declarative half of the action types: what ``actions.registry`` loads (and so
# what lint loads). At module level these import only the stdlib, leaves and each
# other; runtime parts (asyncio, httpx, Jinja2, Apprise, the store, the dispatcher)
# are imported inside ``fire`` or under TYPE_CHECKING. config normalizes, checks,
# orders and lists actions through it; state rebuilds the typed spec from the running
# registry with it.
ACTION_TYPES = ("registry", "common", "options", "agents", "run", "routine", "notify",
                "webhook_out")
ACTION_LEAVES = {"reconciler", "reconciler.model", "reconciler.errors", "reconciler.durations",
                 "reconciler.redaction", "reconciler.events", "reconciler.addflags",
                 "reconciler.typetable"}
ACTIONS_DECLARATIVE = {f"reconciler.actions.{n}" for n in ACTION_TYPES}

DECLARATIVE = CONDITIONS_DECLARATIVE | SOURCES_DECLARATIVE | ACTIONS_DECLARATIVE


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


# -- actions reach state only through the Store ----------------------------------------

# what actions may import from the state layer: the Store (its seam, usually under
# TYPE_CHECKING) and the record shapes; never the write toolkit or the store's parts
ACTIONS_STATE_IMPORTS = {"reconciler.state.store", "reconciler.state.records"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "actions").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_actions_write_state_only_through_the_store(path: Path) -> None:
    imported = _imports(path)
    bad = sorted(
        m for m in imported
        if m == "reconciler.atomic" or m.startswith("reconciler.atomic.")
        or (m.startswith("reconciler.state.")
            and not any(m == a or m.startswith(a + ".") for a in ACTIONS_STATE_IMPORTS))
    )
    assert bad == [], (f"{path.relative_to(ROOT)} reaches state around the Store: {bad} "
                       "(add a Store method instead)")


# -- no module-level import cycles ---------------------------------------------------------


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


NAMES = {_module_name(p): p for p in MODULES}


def _names_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(path: Path) -> set[str]:
    """Package modules ``path`` imports when it is executed: top-level statements and
    the bodies of top-level ``if``/``try`` (not ``if TYPE_CHECKING:``, not functions).
    ``from a import b`` is the module ``a.b`` when that is a module, else ``a``."""
    found: set[str] = set()
    body = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.If):
            if not _names_type_checking(node.test):
                body.extend(node.body)
            body.extend(node.orelse)
        elif isinstance(node, ast.Try):
            body.extend([*node.body, *node.orelse, *node.finalbody])
            for handler in node.handlers:
                body.extend(handler.body)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in NAMES)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node.module, node.level)
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                if sub in NAMES:
                    found.add(sub)
                elif module in NAMES:
                    found.add(module)
    return found


def _absolute(path: Path, module: str | None, level: int) -> str:
    """The absolute name of ``from <level dots><module> import ...`` in ``path``."""
    if level == 0:
        return module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


IMPORT_GRAPH = {name: _module_level_imports(path) - {name} for name, path in NAMES.items()}

# Module-level cycles other tracks of issue 10 are removing (sources, conditions); each
# entry is one cycle (its modules, sorted). Delete an entry when its cycle is gone.
KNOWN_CYCLES: list[list[str]] = []


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_cycles() -> None:
    found = _cycles(IMPORT_GRAPH)
    assert [c for c in found if c not in KNOWN_CYCLES] == [], "module-level import cycles"
    assert [c for c in KNOWN_CYCLES if c not in found] == [], (
        "a known cycle is gone: delete it from KNOWN_CYCLES")


def _runtime_imports(path: Path) -> set[str]:
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


SOURCE_LEAVES = ("reconciler.model", "reconciler.errors", "reconciler.durations",
          "reconciler.redaction", "reconciler.addflags", "reconciler.findings",
          "reconciler.typetable")
RUNTIME = ("httpx", "asyncio", "jinja2", "apprise", "jsonschema", "reconciler.processes",
           "reconciler.sources.context", "reconciler.sources.process")


@pytest.mark.parametrize("module", sorted(SOURCES_DECLARATIVE))
def test_source_types_import_only_leaves_at_module_level(module: str) -> None:
    """The declarative half of sources imports leaves and itself only: lint and config
    reach it without httpx or asyncio (the runtime imports sit inside ``observe``)."""
    rel = Path(*module.split(".")[1:])
    path = PACKAGE / rel / "__init__.py" if (PACKAGE / rel).is_dir() else \
        PACKAGE / rel.with_suffix(".py")
    imported = _runtime_imports(path)
    heavy = sorted(m for m in imported if m.split(".")[0] in RUNTIME or m in RUNTIME)
    assert heavy == [], f"{module} imports {heavy} at module level"
    inside = sorted(m for m in imported if m.startswith("reconciler.")
                    and not m.startswith(SOURCE_LEAVES)
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
        for m in _runtime_imports(path):
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


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_upper_areas_are_imported_only_from_above(path: Path) -> None:
    area = _area(path)
    imported = _imports(path)
    bad = sorted(
        m for m in imported
        if m.startswith("reconciler.") and m.split(".")[1] in IMPORTED_ONLY_BY
        and m.split(".")[1] != area and area not in IMPORTED_ONLY_BY[m.split(".")[1]]
    )
    assert bad == [], f"{path.relative_to(ROOT)} ({area}) imports {bad}"


@pytest.mark.parametrize("path", [p for p in MODULES if _area(p) == "client"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_client_uses_only_the_daemons_protocol(path: Path) -> None:
    bad = sorted(m for m in _imports(path)
                 if m.startswith("reconciler.daemon.") and m not in CLIENT_MAY_USE)
    assert bad == [], f"{path.relative_to(ROOT)} imports the daemon's internals {bad}"


def _top_level_imports(path: Path) -> set[str]:
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
    imported = _top_level_imports(PACKAGE / "actions" / f"{name}.py")
    bad = sorted(m for m in imported
                 if (m.split(".")[0] in ("reconciler", "httpx", "jinja2", "apprise", "asyncio")
                     and m not in ACTION_LEAVES | declarative))
    assert bad == [], f"reconciler/actions/{name}.py imports {bad} at module level"


def test_every_action_type_module_is_checked() -> None:
    from reconciler.actions import registry

    assert {m.__name__.rsplit(".", 1)[1] for m in registry.TYPES.values()} <= set(ACTION_TYPES)
