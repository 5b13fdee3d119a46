"""The registries' lazy type tables: every key names its module, a module is imported
the first time its entry is read, and a command pays only for the types it meets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.typetable import TypeTable
from tests.conftest import Repo


def _type_modules() -> set[str]:
    from reconciler.actions import registry as actions
    from reconciler.conditions import registry as conditions
    from reconciler.sources import registry as sources

    return {table.module_name(key) for table in (sources.TYPES, actions.TYPES, conditions.MODES)
            for key in table}


# What lint imports in a child process, printed as JSON (imports are per process).
_PROBE = """
import json, sys
from reconciler.cli import main
rc = main.run(sys.argv[1:])
print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith("reconciler."))]))
"""


def _lint_imports(repo: Repo) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, "--root", str(repo.root), "lint"],
                          capture_output=True, text=True, timeout=60, check=True)
    rc, modules = json.loads(proc.stdout.splitlines()[-1])
    assert rc in (0, 1), proc.stderr
    return sorted(set(modules) & _type_modules())


def test_a_table_imports_a_module_when_its_entry_is_read() -> None:
    table: TypeTable[object] = TypeTable("json", {"dec": "decoder", "enc": "encoder"})
    assert list(table) == ["dec", "enc"] and len(table) == 2 and "dec" in table
    assert table.loaded() == [] and "nope" not in table
    assert table["enc"] is sys.modules["json.encoder"]
    assert table.loaded() == ["enc"]
    assert table.module_name("dec") == "json.decoder"
    with pytest.raises(KeyError):
        table["nope"]


def test_flagged_reads_only_the_module_asked_about() -> None:
    from reconciler.sources import registry

    fresh: TypeTable[object] = TypeTable("reconciler.sources", {"command": "command",
                                                                "webhook": "webhook"})
    streams = fresh.flagged("STREAM")
    assert "command" in streams and fresh.loaded() == ["command"]
    assert "webhook" not in streams and "nope" not in streams and 3 not in streams
    assert "ws" in registry.PUSHED and "poll" not in registry.PUSHED
    assert "ws" in registry.STREAMS and "webhook" not in registry.STREAMS


def test_every_key_names_the_module_of_that_type() -> None:
    from reconciler.actions import registry as actions
    from reconciler.conditions import registry as conditions
    from reconciler.sources import registry as sources

    assert {k: m.Spec.TYPE for k, m in sources.TYPES.items()} == {k: k for k in sources.TYPES}
    assert {k: m.TYPE for k, m in actions.TYPES.items()} == {k: k for k in actions.TYPES}
    assert {k: m.MODE for k, m in conditions.MODES.items()} == {k: k for k in conditions.MODES}


def test_lint_of_an_empty_repository_imports_no_type_module(repo: Repo) -> None:
    assert _lint_imports(repo) == []


def test_lint_imports_the_types_its_monitors_use(repo: Repo) -> None:
    repo.write("monitors.d/a.yml", "source: {type: file, path: /tmp/x}\n"
               "condition: {mode: match, match: x}\naction: {type: webhook-out, url: "
               "'https://example.com/h'}\n")
    found = _lint_imports(repo)
    assert {"reconciler.sources.file", "reconciler.conditions.match",
            "reconciler.actions.webhook_out"} <= set(found)
    assert not {"reconciler.sources.poll", "reconciler.sources.http",
                "reconciler.conditions.every"} & set(found)


def test_the_probe_sees_the_real_package() -> None:
    import reconciler

    assert Path(reconciler.__file__).parent.parent == Path(__file__).resolve().parent.parent
