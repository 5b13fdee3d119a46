"""The store's durability: a newer state version written meanwhile is never overwritten,
an unchanged file is not re-read, a deleted state directory is not recreated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.state import records
from reconciler.state import store as store_mod


def test_write_state_refuses_a_newer_version_that_appeared_after_the_read(
        tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    store.write_state("m", {"a": 1})
    assert store.read_state("m") == {"a": 1, "version": records.STATE_VERSION}
    path = store.monitor_dir("m") / store_mod.STATE_FILE
    future = json.dumps({"version": 99, "x": "kept"})
    path.write_text(future)  # a newer monitors wrote it meanwhile
    with pytest.raises(records.FutureVersionError, match="format version 99, newer"):
        store.write_state("m", {"a": 2})
    assert path.read_text() == future
    assert store.refusal("m") == store_mod.refused_reason(99)
    assert store_mod.refused_reason(99) == (
        "state.json has format version 99, newer than this monitors supports (kept untouched)")


def test_write_state_without_outside_change_does_not_reread(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    store.write_state("m", {"a": 1})
    store.write_state("m", {"a": 2})  # its own file: the stat matches, no re-read
    assert store.read_state("m") == {"a": 2, "version": records.STATE_VERSION}
    assert store.refusal("m") is None and store.refusal("other") is None
    # a corrupt file written outside is overwritten as before (not a newer version)
    (store.monitor_dir("m") / store_mod.STATE_FILE).write_text("{not json")
    store.write_state("m", {"a": 3})
    assert store.read_state("m") == {"a": 3, "version": records.STATE_VERSION}


def test_store_does_not_recreate_a_deleted_state_directory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = store_mod.Store(state)
    store.write_state("m", {"a": 1})
    import shutil

    shutil.rmtree(state)
    with pytest.raises(OSError):
        store.write_state("m", {"a": 2})
    assert not state.exists()
