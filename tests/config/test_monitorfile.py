"""Checking monitor files in batches (``config.monitorfile.check_batch``): each file's
answer is the one it gets when checked alone, and a bug in one file's step stays that
file's ``internal-error``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.config import monitorfile, normalize
from reconciler.config.files import FileKind

VALID = ("source: {type: poll, command: df -h /, interval: 5m}\n"
         "condition: {mode: match, match: '9[0-9]%'}\n"
         "action: {type: notify, message: 'disk <n>: {{ event }}'}\n"
         "device: box-<n>\n")
TEXTS = [
    VALID,
    "source: [unclosed\n",  # a syntax error
    "source: {type: poll, command: df, intervl: 5m}\naction: {type: notify}\n",  # schema
    "source: {type: poll, command: df, interval: 5m}\naction: {type: notify}\n"
    "condition: {mode: match, match: '(unclosed'}\n",  # a semantic error
    "source: {type: file, path: /etc/motd}\naction: {type: notify}\nenabled: yes\n",  # warning
    "",  # empty
    "- a list\n",
    "source: {type: poll, command: df, interval: 5m}\naction: {type: notify, message: "
    "'{{ nope }}'}\n",  # a bad template
    "name: other\nsource: {type: pid, pid: 1}\naction: {type: notify}\n",  # name mismatch
]


def _items(tmp_path: Path, count: int) -> list[tuple[Path, FileKind, str]]:
    items: list[tuple[Path, FileKind, str]] = []
    for i in range(count):
        path = tmp_path / f"m-{i:03d}.yml"
        path.write_text(TEXTS[i % len(TEXTS)].replace("<n>", str(i)), encoding="utf-8")
        items.append((path, "system" if i % 5 == 0 else "user", f"monitors.d/m-{i:03d}.yml"))
    items.append((tmp_path / "missing.yml", "user", "monitors.d/missing.yml"))
    return items


def test_a_batch_gives_each_file_what_it_gets_alone(tmp_path: Path) -> None:
    items = _items(tmp_path, 2 * monitorfile.BATCH + 7)
    alone = [monitorfile.check(item) for item in items]
    batched = list(monitorfile.check_all(items, 1, None))
    assert batched == alone
    assert {e is None for _, e, _ in batched} == {True, False}
    assert len({p.rule for _, _, problems in batched for p in problems}) >= 6


def test_an_exception_in_a_later_step_is_that_files_one_problem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = normalize.monitor

    def boom(doc: Any, *, name: str, **kwargs: Any) -> Any:
        if name == "m-004":  # its file has a warning: dropped with the error
            raise RuntimeError("boom")
        return real(doc, name=name, **kwargs)

    monkeypatch.setattr(normalize, "monitor", boom)
    items = _items(tmp_path, 20)
    outcomes = list(monitorfile.check_all(items, 1, None))
    _, entry, problems = outcomes[4]
    assert entry is None and [(p.file, p.rule) for p in problems] == [
        ("monitors.d/m-004.yml", "internal-error")]
    assert outcomes[0][1] is not None and outcomes[18][1] is not None  # the batch goes on
    monkeypatch.setattr(normalize, "monitor", real)
    assert outcomes[:4] + outcomes[5:] == [monitorfile.check(item)
                                            for item in items[:4] + items[5:]]
