"""A monitor's generation (``config.generation``): a hash of its file's bytes, shown by
``list --json``, ``list --wide`` and ``view``; it changes exactly when the file does."""

from __future__ import annotations

import json
from typing import Any

from reconciler.config import generation
from tests.conftest import Repo, run_cli
from tests.factories import monitor_yaml


def _row(repo: Repo, name: str) -> dict[str, Any]:
    r = run_cli(["list", "--json"], repo=repo)
    assert r.exit_code == 0, r.output
    return next(m for m in json.loads(r.stdout)["monitors"] if m["name"] == name)


def test_generation_changes_exactly_when_the_file_content_changes(repo: Repo) -> None:
    path = repo.write("monitors.d/head.yml", monitor_yaml("head", "echo one"))
    first = _row(repo, "head")["generation"]
    assert first == generation.of_bytes(path.read_bytes())
    assert first.startswith("g-") and len(first) == 18

    path.touch()  # a new mtime, same bytes
    assert _row(repo, "head")["generation"] == first
    paused = run_cli(["pause", "head", "--reason", "quiet"], repo=repo)
    assert paused.exit_code == 0, paused.output
    assert _row(repo, "head")["generation"] == first  # an overlay is not the file

    path.write_text(path.read_text() + "# a comment\n")
    second = _row(repo, "head")["generation"]
    assert second != first
    path.write_text(monitor_yaml("head", "echo one"))
    assert _row(repo, "head")["generation"] == first  # same content, same generation


def test_view_and_wide_list_show_the_generation(repo: Repo) -> None:
    path = repo.write("monitors.d/head.yml", monitor_yaml("head", "echo one"))
    gen = generation.of_bytes(path.read_bytes())
    view = run_cli(["view", "head"], repo=repo)
    assert view.exit_code == 0, view.output
    assert f"generation:  {gen}" in view.stdout
    assert json.loads(run_cli(["view", "head", "--json"], repo=repo).stdout)["generation"] == gen
    wide = run_cli(["list", "--wide"], repo=repo)
    assert "GENERATION" in wide.stdout and gen in wide.stdout, wide.output


def test_a_monitor_without_a_readable_file_has_no_generation(tmp_path: Any) -> None:
    assert generation.of_file(tmp_path / "gone.yml") is None
