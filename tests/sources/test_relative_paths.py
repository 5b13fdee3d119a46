"""Relative source paths mean the repository root, whatever the daemon's working directory."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from reconciler import settings
from reconciler.sources import registry as source_types
from reconciler.sources.context import SourceContext
from tests import factories
from tests.conftest import Repo


def observe(repo: Repo, source: dict[str, object]) -> str:
    cfg = settings.load(root=repo.root)
    monitor = factories.monitor(source)

    async def go() -> str:
        ctx = SourceContext.create(settings=cfg, dry_run=True)
        try:
            return (await source_types.observe(monitor, ctx)).text
        finally:
            await ctx.aclose()

    return asyncio.run(go())


@pytest.fixture
def elsewhere(tmp_path: Path) -> object:
    """Run the test from a directory that is not the repository root."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    old = os.getcwd()
    os.chdir(other)
    yield other
    os.chdir(old)


def test_relative_file_path_is_read_from_the_repository_root(repo: Repo, elsewhere: Path) -> None:
    repo.write("data/inbox.txt", "hello from the repo\n")
    (elsewhere / "data").mkdir()
    (elsewhere / "data" / "inbox.txt").write_text("wrong directory\n")
    text = observe(repo, {"type": "file", "path": "data/inbox.txt"})
    assert text.startswith("hello from the repo")


def test_poll_runs_in_the_repository_root_unless_cwd_is_given(repo: Repo, elsewhere: Path) -> None:
    (repo.root / "sub").mkdir()
    assert observe(repo, {"type": "poll", "command": ["pwd"], "interval": 5}).strip() == str(
        repo.root.resolve())
    got = observe(repo, {"type": "poll", "command": ["pwd"], "interval": 5, "cwd": "sub"})
    assert got.strip() == str((repo.root / "sub").resolve())
