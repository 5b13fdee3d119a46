"""The README, the schema and the code's registries agree (STYLE habit 7)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import jsonschema
import pytest
import yaml

from reconciler import durations
from reconciler.config.problems import RULES
from reconciler.sources import registry as source_types
from reconciler.sources.fields import camel
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
SCHEMA = json.loads((ROOT / "schemas" / "monitor.schema.json").read_text())


def test_every_rule_id_is_in_the_readme_table() -> None:
    table = set(re.findall(r"^\| `([a-z0-9-]+)` \| (?:error|warning|info)", README, re.M))
    assert set(RULES) - table == set()
    assert table - set(RULES) == set()


def test_source_types_agree_across_schema_registry_and_readme() -> None:
    in_schema = set(SCHEMA["properties"]["source"]["properties"]["type"]["enum"])
    assert set(source_types.TYPES) == in_schema
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


# --- source types: schema branch <-> spec module <-> README table -----------------

SOURCE_DEFS = SCHEMA["$defs"]


def _spec_default(f: dataclasses.Field[Any], prop: dict[str, Any]) -> object:
    """The schema ``default`` a spec field implies (MISSING: none; a default of None
    means "unset" and a computed default is said in the description instead)."""
    if f.default is not dataclasses.MISSING:
        value: object = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return dataclasses.MISSING
    if value is None:
        return dataclasses.MISSING
    if prop.get("$ref") == "#/$defs/duration":
        return durations.format(float(value))  # type: ignore[arg-type]
    return value


@pytest.mark.parametrize("kind", sorted(source_types.TYPES))
def test_source_schema_fields_carry_the_spec_docs_and_defaults(kind: str) -> None:
    """Every field of a source branch has the description, default and example its spec
    module declares (editors show them on hover); the branch and the spec have the same
    fields."""
    spec = source_types.TYPES[kind].Spec
    props = SOURCE_DEFS[f"source-{kind}"]["properties"]
    by_key = {camel(f.name): f for f in dataclasses.fields(spec)}
    assert set(props) - {"type"} == set(by_key), kind
    assert props["type"]["const"] == kind and props["type"]["description"]
    for key, f in by_key.items():
        prop = props[key]
        assert prop["description"] == f.metadata["description"], (kind, key)
        assert prop["examples"] == [f.metadata["example"]], (kind, key)
        want = _spec_default(f, prop)
        if want is dataclasses.MISSING:
            assert "default" not in prop, (kind, key)
        else:
            assert prop["default"] == want, (kind, key)


@pytest.mark.parametrize("kind", sorted(source_types.TYPES))
def test_source_examples_are_valid_and_normalize_to_the_defaults(kind: str) -> None:
    """The examples together make a schema-valid source; without the optional fields it
    normalizes to the schema's defaults."""
    from reconciler.config import normalize, schemas

    props = SOURCE_DEFS[f"source-{kind}"]["properties"]
    full = {key: prop["examples"][0] for key, prop in props.items()}
    doc = {"source": full, "action": {"type": "notify"}}
    assert schemas.validator("monitor").is_valid(doc), full
    required = SOURCE_DEFS[f"source-{kind}"]["required"]
    bare = normalize.source({k: full[k] for k in required}).to_json()
    for key, prop in props.items():
        if "default" in prop:
            value = prop["default"]
            if prop.get("$ref") == "#/$defs/duration":
                value = durations.parse(value)
            assert bare[key] == value, (kind, key)


def _readme_source_rows() -> dict[str, tuple[str, str]]:
    """``type -> (fields cell, defaults cell)`` from README's ``source`` field table."""
    section = README.split("### `source`", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \| (.+?) \| (.+?) \|$", section, re.M)
    return {kind: (fields_, defaults) for kind, fields_, defaults in rows}


def _readme_value(text: str) -> object:
    text = text.strip()
    if text.endswith(" MiB"):
        return int(text.removesuffix(" MiB")) * 1024 * 1024
    try:
        return json.loads(text)
    except ValueError:
        return durations.parse(text)


def test_readme_source_table_agrees_with_the_schema() -> None:
    """README's ``source`` table lists each type's fields (required ones in bold) and its
    defaults as the schema does; a default the schema cannot hold (computed from the
    interval) is one the schema's description states."""
    rows = _readme_source_rows()
    assert set(rows) == set(source_types.TYPES)
    for kind, (fields_cell, defaults_cell) in rows.items():
        branch = SOURCE_DEFS[f"source-{kind}"]
        props = {k: v for k, v in branch["properties"].items() if k != "type"}
        named = set(re.findall(r"`(\w+)`", fields_cell))
        assert set(props) <= named, (kind, set(props) - named)
        bold = set(re.findall(r"\*\*`(\w+)`\*\*", fields_cell))
        assert bold == set(branch["required"]) - {"type"}, kind
        stated = dict(re.findall(r"`(\w+)`: ([^;]+)", defaults_cell))
        for key, prop in props.items():
            if "default" in prop and prop["default"] != {}:
                assert key in stated, f"README: {kind} {key} default {prop['default']!r}"
        for key, text in stated.items():
            prop = props[key]
            if "default" in prop:
                want = prop["default"]
                if prop.get("$ref") == "#/$defs/duration":
                    want = durations.parse(want)
                assert _readme_value(text) == want, (kind, key, text)
            else:
                assert "Default:" in prop["description"], (kind, key, text)


# --- action types: schema branch <-> type module <-> README table -------------------


def _action_rows() -> dict[str, tuple[str, str]]:
    """README's ``action`` table: type -> (fields column, defaults column)."""
    start = README.index("### `action` (exactly one `type`)")
    rows = re.findall(r"^\| `([a-z-]+)` \| (.*) \| (.*) \|$", README[start:start + 3000], re.M)
    return {kind: (fields, defaults) for kind, fields, defaults in rows}


def _action_branch(kind: str) -> dict[str, object]:
    branch: dict[str, object] = SCHEMA["$defs"][f"action-{kind}"]
    return branch


def test_action_types_agree_across_schema_registry_and_readme() -> None:
    from reconciler.actions import registry

    in_schema = SCHEMA["properties"]["action"]["properties"]["type"]["enum"]
    assert list(registry.TYPES) == in_schema
    assert set(_action_rows()) == set(in_schema)
    for kind, module in registry.TYPES.items():
        props = _action_branch(kind)["properties"]
        assert isinstance(props, dict)
        assert set(props) - {"type"} == set(module.FIELDS), kind
        assert [k for k in registry.KEY_ORDER if k in props] == ["type", *(
            k for k in registry.KEY_ORDER if k in module.FIELDS)], kind


def test_every_action_field_has_a_description_and_an_example() -> None:
    from reconciler.actions import registry

    for kind in registry.TYPES:
        props = _action_branch(kind)["properties"]
        assert isinstance(props, dict)
        for name, field in props.items():
            assert field.get("description"), f"action-{kind}.{name}: no description"
            assert field.get("examples"), f"action-{kind}.{name}: no examples"
            if field.get("$ref") == "#/$defs/duration":
                assert all(isinstance(e, str) for e in field["examples"]), (kind, name)
        durations = {n for n, f in props.items() if f.get("$ref") == "#/$defs/duration"}
        assert durations == set(registry.TYPES[kind].DURATIONS), kind


def test_action_defaults_agree_across_schema_code_and_readme() -> None:
    """A schema ``default`` is what normalization fills in, and README's defaults column
    says it; every field is in README's fields column, required ones in bold."""
    from reconciler.actions import registry

    rows = _action_rows()
    for kind in registry.TYPES:
        branch = _action_branch(kind)
        props, required = branch["properties"], branch["required"]
        assert isinstance(props, dict) and isinstance(required, list)
        minimal = {k: props[k]["examples"][0] for k in required}
        normalized = registry.normalize(minimal).to_json()
        fields_col, defaults_col = rows[kind]
        for name, field in props.items():
            if name == "type":
                continue
            bold = f"**`{name}`**" in fields_col
            assert f"`{name}`" in fields_col, f"README action {kind}: {name} not listed"
            assert bold == (name in required), f"README action {kind}: {name} bold?"
            if "default" not in field:
                continue
            default = field["default"]
            expected = (durations.parse(default) if field.get("$ref") == "#/$defs/duration"
                        else default)
            assert normalized[name] == expected, f"action-{kind}.{name}: schema default"
            if default != {}:
                said = (f"`{name}`: {default}", f"`{name}`: `{default}`")
                assert any(s in defaults_col for s in said), (
                    f"README action {kind}: default of {name} is not {default!r}")
