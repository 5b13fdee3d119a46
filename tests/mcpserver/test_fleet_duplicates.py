"""``monitor_watch`` refuses a behaviour that runs on a reachable fleet peer, naming the
peer and its monitor (``client.fleet.duplicates``, as ``add``): a real peer daemon
serving HTTP on loopback."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler import settings
from reconciler.mcpserver import server
from reconciler.state import audit
from tests.server.conftest import TOKEN, Peer, peers  # noqa: F401  (peers: a fixture)
from tests.server.test_fleet import write_fleet


def test_watch_refuses_a_behaviour_running_on_a_peer(
        peers: Callable[..., Peer], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    here = peers("alpha", start=False)
    there = peers("beta", monitors={"original": "[echo, q]"})
    write_fleet(here.repo, here, there)
    monkeypatch.setenv("MONITORS_TOKEN", TOKEN)
    cfg = settings.load(root=here.repo.root, state_dir=here.repo.state, device="alpha")

    result, error = server.call(cfg, "monitor_watch", {
        "name": "copy", "wait": 0,
        "source": {"type": "poll", "command": ["echo", "q"], "interval": "1s"},
        "action": {"type": "notify", "message": "original saw {{ event }}"}}, client="t")
    assert result is None and error is not None
    assert "same behaviour already exists on another device: 'original' on beta" in error
    assert not (here.repo.user / "copy.yml").exists()
    [record] = audit.read(here.repo.state)
    assert record["outcome"].startswith("refused: same behaviour already exists on another")
