"""The README, the schema and the code's registries agree (STYLE habit 7)."""

from __future__ import annotations

import json
import re

import jsonschema
import yaml

from reconciler import sources
from reconciler.config.problems import RULES
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SCHEMA = json.loads((ROOT / "schemas" / "monitor.schema.json").read_text())


def test_every_rule_id_is_in_the_readme_table() -> None:
    table = set(re.findall(r"^\| `([a-z0-9-]+)` \| (?:error|warning|info)", README, re.M))
    assert set(RULES) - table == set()
    assert table - set(RULES) == set()


def test_source_types_agree_across_schema_registry_and_readme() -> None:
    in_schema = set(SCHEMA["properties"]["source"]["properties"]["type"]["enum"])
    assert set(sources.REGISTRY) | set(sources.NOT_EVALUATED) == in_schema
    for kind in in_schema:
        assert f"`{kind}`" in README, kind


def test_action_types_agree_across_schema_and_readme() -> None:
    in_schema = set(SCHEMA["properties"]["action"]["properties"]["type"]["enum"])
    assert in_schema == {"run", "routine", "notify", "webhook-out"}
    for kind in in_schema:
        assert f"`{kind}`" in README, kind


OVERLAY = json.loads((ROOT / "schemas" / "overlay.schema.json").read_text())


def _table(heading: str) -> tuple[list[str], dict[str, list[str]]]:
    """The first table under README's ``heading`` line: its column names and, by the
    field in its first column (backticks removed), the row's cells."""
    lines = README[README.index("\n" + heading + "\n"):].splitlines()[2:]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows: list[list[str]] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    header, body = rows[0], rows[2:]
    return header, {r[0].strip("`"): r for r in body}


def _plain(cell: str) -> str:
    return cell.replace("`", "")


def _default(cell: str) -> tuple[bool, object]:
    """(whether the cell states a literal default, its value): one backticked YAML value."""
    if re.fullmatch(r"`[^`]+`", cell):
        return True, yaml.safe_load(cell.strip("`"))
    return False, None


def _agree(heading: str, schema: dict[str, object], properties: dict[str, dict[str, object]]
           ) -> None:
    header, rows = _table(heading)
    assert set(rows) == set(properties), heading
    meaning = header.index("meaning")
    default = header.index("default") if "default" in header else None
    for name, cells in rows.items():
        prop = properties[name]
        assert prop.get("description") == _plain(cells[meaning]), (heading, name)
        if default is not None:
            literal, value = _default(cells[default])
            assert ("default" in prop) == literal, (heading, name, cells[default])
            if literal:
                assert prop["default"] == value, (heading, name)
    _documented(schema, properties)


def _documented(schema: dict[str, object], properties: dict[str, dict[str, object]]) -> None:
    """Every field (and every field of a nested mapping) has a description and examples
    that validate against the field's own schema; a default validates too."""
    defs = schema.get("$defs", {})
    for name, prop in properties.items():
        assert prop.get("description"), name
        assert prop.get("examples"), name
        check = jsonschema.Draft202012Validator({"$defs": defs, **prop})
        for example in [*prop["examples"], *([prop["default"]] if "default" in prop else [])]:
            assert not list(check.iter_errors(example)), (name, example)
        nested = prop.get("properties")
        if isinstance(nested, dict) and name not in ("source", "action"):
            _documented(schema, nested)


def test_top_level_fields_agree_across_readme_and_schema() -> None:
    _agree("### Top level", SCHEMA, SCHEMA["properties"])


def test_condition_fields_agree_across_readme_schema_and_registry() -> None:
    from reconciler.conditions import registry
    from reconciler.model import ConditionMode

    branch = SCHEMA["properties"]["condition"]
    _agree("### `condition`", SCHEMA, branch["properties"])
    assert branch["properties"]["mode"]["enum"] == list(registry.MODES) == list(ConditionMode)
    _, rows = _table("## Conditions")
    assert [m.split()[0].strip("`") for m in rows] == list(registry.MODES)


def test_overlay_fields_agree_across_readme_and_schema() -> None:
    _agree("### Overlays (`monitors.d/overlays/<monitor>.yml`, written by `pause`/`pin`)",
           OVERLAY, OVERLAY["properties"])


def test_duration_definition_describes_the_grammar() -> None:
    from reconciler import durations

    duration = SCHEMA["$defs"]["duration"]
    assert duration["description"] == "A duration: 500ms, 30s, 5m, 8h, 1d or integer seconds"
    check = jsonschema.Draft202012Validator({"$defs": SCHEMA["$defs"],
                                             "$ref": "#/$defs/duration"})
    for good in (0, 30, "45", "500ms", "30s", "5m", "8h", "1d", "2w", "1h30m"):
        durations.parse(good)
        assert check.is_valid(good), good
    for bad in ("5 minutes", "1.5", "", "-1", "30S", 1.5, True, -1):
        assert not check.is_valid(bad), bad
