"""``monitors remove --completed`` and lint's ``completed`` info: a completed user monitor's
file is removed, a completed built-in is paused; a monitor edited since it completed
is left alone."""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.conditions import lifecycle
from reconciler.state import store as store_mod
from tests.conftest import Repo, run_cli
from tests.factories import monitor


def doc(name: str, stop_when: str = "merged") -> dict[str, Any]:
    return {"source": {"type": "poll", "command": ["gh", "pr", "view", name], "interval": "1m"},
            "stopWhen": stop_when, "action": {"type": "notify"}}


def _complete(repo: Repo, name: str, doc: dict[str, Any]) -> None:
    store = store_mod.Store(repo.state)
    store.begin_lifecycle(name, lifecycle.key(monitor(name=name, **doc)), 0.0)
    store.complete(name, "stopWhen matched 'merged'", 1.0)


def test_remove_completed_removes_user_files_and_pauses_built_ins(repo: Repo) -> None:
    repo.write("monitors.d/pr-1.yml", yaml.safe_dump({"name": "pr-1", **doc("pr-1")}))
    repo.write("system/pr-2.yml", yaml.safe_dump({"name": "pr-2", **doc("pr-2")}))
    repo.write("monitors.d/pr-3.yml",
               yaml.safe_dump({"name": "pr-3", **doc("pr-3", "merged|closed")}))
    for name in ("pr-1", "pr-2", "pr-3"):
        _complete(repo, name, doc(name))  # pr-3 was edited since: a new life

    lint = run_cli(["lint"], repo=repo)
    assert lint.exit_code == 0, lint.output
    assert lint.stdout.count("[completed]") == 2 and "pr-3 completed" not in lint.stdout

    r = run_cli(["remove", "--completed"], repo=repo)
    assert r.exit_code == 0, r.output
    assert not (repo.user / "pr-1.yml").exists()
    assert (repo.system / "pr-2.yml").exists()
    overlay = yaml.safe_load((repo.overlays / "pr-2.yml").read_text())
    assert overlay["pause"]["reason"] == "completed (stopWhen matched 'merged')"
    assert (repo.user / "pr-3.yml").exists()
    assert run_cli(["remove", "--completed"], repo=repo).stdout == "no completed monitors\n"


def test_name_and_completed_are_exclusive(repo: Repo) -> None:
    r = run_cli(["remove", "x", "--completed"], repo=repo)
    assert r.exit_code == 1 and "give NAME or --completed, not both" in r.stderr
