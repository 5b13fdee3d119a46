"""The JSON Schemas shipped in the package, and the one compiled validator engine.

Engine: ``jsonschema_rs`` (a compiled draft 2020-12 validator). Chosen by
measurement (``bench/lint_scale.py`` prints both engines' per-file figures): it
validates a realistic monitor in about 5 µs against about 650-1,300 µs for the
pure-Python ``jsonschema`` on a shared 2-CPU machine, and reports
instance paths we map back to YAML lines. One engine is used everywhere
(lint, the daemon's reload, ``add``), because engines disagree on details
(``$`` before a trailing newline, for one).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"

Kind = Literal["monitor", "overlay", "fleet", "settings"]
"""``settings`` is ``monitors.toml``; the fleet file is ``fleet``."""


def path(kind: Kind) -> Path:
    """The schema file for ``kind`` (``schemas/<kind>.schema.json`` inside the package)."""
    return SCHEMA_DIR / f"{kind}.schema.json"


def text(kind: Kind) -> str:
    """The schema's JSON text as shipped (for ``monitors schema``)."""
    return path(kind).read_text(encoding="utf-8")


@functools.cache
def document(kind: Kind) -> dict[str, Any]:
    """The parsed schema (cached; do not mutate)."""
    data: dict[str, Any] = json.loads(text(kind))
    return data


@functools.cache
def validator(kind: Kind) -> Any:
    """The compiled ``jsonschema_rs`` validator for ``kind`` (cached).

    Its ``iter_errors(instance)`` yields errors with ``instance_path``,
    ``schema_path``, ``kind`` (``.name``, ``.as_dict()``) and ``message``.
    """
    import jsonschema_rs

    return jsonschema_rs.validator_for(document(kind))


def at(kind: Kind, schema_path: list[str | int]) -> Any:
    """The sub-schema at ``schema_path`` (a JSON-pointer-like list), or None."""
    node: Any = document(kind)
    for step in schema_path:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return None
    return node
