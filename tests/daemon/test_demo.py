"""``monitors run --demo``: the demo writes the file its demo monitor watches."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.helpers import reap


class _ElsewhereState(Daemon):
    """A daemon whose state directory is not ``<root>/.history``."""

    def __init__(self, repo: Repo, state: Path) -> None:
        super().__init__(repo, "--demo")
        self.state_dir = state

    def argv(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "reconciler", "--root", str(self.repo.root),
                "--state-dir", str(self.state_dir), "--device", "test-box", *extra]


def test_demo_writes_the_file_the_demo_monitor_watches(repo: Repo, tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[2] / "monitors.d" / "demo-file.yml"
    text = shipped.read_text().replace("interval: 5s", "interval: 500ms")
    repo.write("monitors.d/demo-file.yml", text)
    state = tmp_path / "elsewhere"
    d = _ElsewhereState(repo, state)
    try:
        d.start()
        tick = repo.root / ".history" / "demo" / "tick.txt"
        wait_for(tick.exists, what="demo file below the root", log=d.log)
        assert not (state / "demo").exists()
        # the shipped monitor sees it (its first observation is the tick, or `missing` and
        # then the tick, which fires)
        def saw_tick() -> bool:
            doc = read_json(state / "monitors" / "demo-file" / "state.json") or {}
            return "demo tick" in json.dumps(doc)
        wait_for(saw_tick, what="demo-file observed the tick", log=d.log)
        assert d.stop() == 0
    finally:
        reap(d.proc)
    help_text = d.cli("run", "--help").stdout
    assert "<repository root>/.history/demo/tick.txt" in " ".join(help_text.split())
