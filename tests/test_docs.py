"""The README, the schema and the code's registries agree (STYLE habit 7)."""

from __future__ import annotations

import json
import re

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
    from reconciler import durations
    from reconciler.actions import registry

    rows = _action_rows()
    for kind in registry.TYPES:
        branch = _action_branch(kind)
        props, required = branch["properties"], branch["required"]
        assert isinstance(props, dict) and isinstance(required, list)
        minimal = {k: props[k]["examples"][0] for k in required}
        normalized = registry.normalize(minimal)
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
