"""The watcher's filter and the debounced trigger, with real watchdog events."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from reconciler.daemon import watch


def test_interesting_paths() -> None:
    assert watch.interesting("/r/monitors.d/a.yml")
    assert watch.interesting("/r/monitors.d/overlays/a.yaml")
    assert watch.interesting("/r/monitors.toml", extra_names=["monitors.toml"])
    assert not watch.interesting("/r/monitors.d/.a.yml.swp")
    assert not watch.interesting("/r/monitors.d/a.yml~")
    assert not watch.interesting("/r/.git/index")
    assert not watch.interesting("/r/README.md")


def test_burst_of_events_gives_one_wakeup(tmp_path: Path) -> None:
    layer = tmp_path / "monitors.d"
    layer.mkdir()

    async def main() -> tuple[list[str] | None, list[str] | None, float]:
        trigger = watch.Trigger(debounce=0.1, max_delay=2.0)
        watcher = watch.Watcher(trigger, dirs=[layer], root=tmp_path)
        watcher.start()
        try:
            start = time.monotonic()
            for i in range(20):  # like a checkout: many files at once
                (layer / f"m{i}.yml").write_text("x")
            # an editor's rename-on-save
            (layer / ".m0.yml.tmp").write_text("y")
            os.replace(layer / ".m0.yml.tmp", layer / "m0.yml")
            first = await trigger.wait(10)
            took = time.monotonic() - start
            second = await trigger.wait(0.3)  # nothing more: the burst was one wake-up
            return first, second, took
        finally:
            watcher.stop()

    first, second, took = asyncio.run(main())
    assert first, "no wake-up for the burst"
    assert second is None
    assert took < 5


def test_recreated_layer_directory_is_watched_again(tmp_path: Path) -> None:
    layer = tmp_path / "monitors.d"
    layer.mkdir()

    async def main() -> list[str] | None:
        trigger = watch.Trigger(debounce=0.05)
        watcher = watch.Watcher(trigger, dirs=[layer], root=tmp_path)
        watcher.start()
        try:
            layer.rmdir()
            await trigger.wait(5)  # the deletion itself
            layer.mkdir()
            await trigger.wait(5)
            watcher.ensure()
            (layer / "new.yml").write_text("x")
            return await trigger.wait(10)
        finally:
            watcher.stop()

    reasons = asyncio.run(main())
    assert reasons and any("new.yml" in r for r in reasons), reasons
