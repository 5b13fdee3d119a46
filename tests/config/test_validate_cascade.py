"""One mistake, one error: a missing or unknown discriminator (``source.type``,
``action.type``) and a node refused for its YAML tag do not cascade into schema noise."""

from __future__ import annotations

import pytest

from reconciler.config import validate, yamlload
from tests.conftest import Repo, run_cli

SOURCE_TYPES = "command, poll, poll-http, file, pid, device, ws, webhook"


def problems(text: str, kind: str = "monitor") -> list[tuple[int, int, str, str, str]]:
    """Everything ``yamlload`` and ``validate`` report for ``text``, as
    ``(line, col, field, message, rule)``."""
    doc, found = yamlload.parse(text.encode(), file="x.yml")
    assert doc is not None, found
    found = found + validate.check(doc, kind=kind)  # type: ignore[arg-type]
    return [(p.line, p.col, p.field, p.message, p.rule) for p in found]


def test_missing_source_type_is_one_error_at_the_source_key(repo: Repo) -> None:
    # the newcomer's report: 16 contradictory errors (one per if/then branch)
    repo.write("monitors.d/x.yml", "source: {interval: 5s, command: x}\naction: {type: notify}\n")
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    first, summary = r.stdout.splitlines()
    assert first.endswith(f"monitors.d/x.yml:1:1: error: source: missing required field 'type' "
                          f"(one of {SOURCE_TYPES}) [schema]"), first
    assert summary == "1 monitor, 1 error, 0 warnings"


def test_missing_type_in_block_style_points_at_the_key_line() -> None:
    text = ("description: d\n"
            "source:\n"
            "  interval: 5s\n"
            "  command: x\n"
            "action:\n"
            "  type: notify\n")
    assert problems(text) == [
        (2, 1, "source", f"missing required field 'type' (one of {SOURCE_TYPES})", "schema")]


def test_missing_action_type_is_one_error() -> None:
    text = "source: {type: poll, command: x, interval: 5s}\naction:\n  message: hi\n"
    assert problems(text) == [
        (2, 1, "action", "missing required field 'type' (one of run, routine, notify, "
         "webhook-out)", "schema")]


def test_both_types_missing_gives_one_error_each() -> None:
    found = problems("source: {command: x}\naction: {prompt: x}\n")
    assert [(f, m.split(" (")[0]) for _, _, f, m, _ in found] == [
        ("source", "missing required field 'type'"),
        ("action", "missing required field 'type'")]


@pytest.mark.parametrize(("value", "did"), [
    ("pol", " (did you mean 'poll'?)"),
    ("cron", ""),
    ("5", ""),
])
def test_unknown_source_type_is_one_enum_error(value: str, did: str) -> None:
    text = f"source:\n  type: {value}\n  cmd: x\n  interval: 5s\naction: {{type: notify}}\n"
    shown = repr(int(value)) if value.isdigit() else repr(value)
    assert problems(text) == [
        (2, 9, "source.type", f"{shown} is not one of {SOURCE_TYPES}{did}", "schema")]


def test_unknown_action_type_is_one_enum_error() -> None:
    text = "source: {type: poll, command: x, interval: 5s}\naction: {type: notfy, message: m}\n"
    [(_, _, field, message, _)] = problems(text)
    assert field == "action.type" and message.endswith("(did you mean 'notify'?)")


def test_known_type_still_reports_its_branch_errors() -> None:
    # the cut applies only when the type is missing or unknown
    found = problems("source: {type: poll, command: x}\naction: {type: run, agent: a}\n")
    assert {f for _, _, f, _, _ in found} == {"source.interval", "action.prompt"}


def test_empty_source_mapping_is_one_error() -> None:
    assert [f for _, _, f, _, _ in problems("source: {}\naction: {type: notify}\n")] == [
        "source"]


def test_tag_on_a_mapping_hides_schema_errors_beneath_it(repo: Repo) -> None:
    # before: the yaml-tag error plus 17 schema errors about the tagged mapping
    text = "source: !!python/object/apply:os.system\n  args: [ls]\naction:\n  type: notify\n"
    found = problems(text)
    assert [(ln, col, f, rule) for ln, col, f, _, rule in found] == [
        (1, 9, "source", "yaml-tag")]
    repo.write("monitors.d/x.yml", text)
    r = run_cli(["lint"], repo=repo)
    assert r.stdout.splitlines()[-1] == "1 monitor, 1 error, 0 warnings", r.stdout


def test_tag_on_a_valid_shaped_mapping_hides_its_missing_fields() -> None:
    text = "source: !!python/object:os.system\n  type: poll\n  command: x\naction: {type: notify}\n"
    assert [rule for *_, rule in problems(text)] == ["yaml-tag"]


def test_tag_elsewhere_keeps_unrelated_schema_errors() -> None:
    text = ("source: {type: poll, command: x}\n"
            "description: !!python/name:os.system\n"
            "action: {type: notify}\n")
    found = {(f, rule) for _, _, f, _, rule in problems(text)}
    assert found == {("description", "yaml-tag"), ("source.interval", "schema")}


def test_tag_on_the_document_hides_every_schema_error() -> None:
    text = "--- !!python/object:foo.Bar\nsource: {command: x}\nnope: 1\n"
    assert [rule for *_, rule in problems(text)] == ["yaml-tag"]


def test_tag_in_an_overlay_hides_its_schema_errors() -> None:
    text = "monitor: m\npause: !!python/object:x\n  forever: true\n"
    assert [rule for *_, rule in problems(text, kind="overlay")] == ["yaml-tag"]
