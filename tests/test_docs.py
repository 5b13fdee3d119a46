"""The README, the schema and the code's registries agree (STYLE habit 7)."""

from __future__ import annotations

import json
import re

from reconciler.config.problems import RULES
from reconciler.sources import registry as source_types
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
