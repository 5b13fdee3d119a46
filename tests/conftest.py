"""Shared fixtures: a temp monitors repository and one CLI helper that never swallows errors."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import settings as hypothesis_settings

from reconciler.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Repo:
    """A temp monitors repository (``monitors.d/``, ``system/``, state in ``.history``)."""

    root: Path

    @property
    def user(self) -> Path:
        return self.root / "monitors.d"

    @property
    def system(self) -> Path:
        return self.root / "system"

    @property
    def overlays(self) -> Path:
        return self.user / "overlays"

    @property
    def state(self) -> Path:
        return self.root / ".history"

    def write(self, rel: str, text: str) -> Path:
        """Write ``text`` (dedented) at ``rel`` below the root and return the path."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Caches (lint's channel-URL answers) go to the session's temp dir, never ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands run by tests get no ``COLUMNS``/``LINES``: their width is the one a pipe
    gets (pytest-xdist workers inherit ``COLUMNS=80`` from execnet, which would cut
    ``monitors list`` lines that a serial run shows whole). A test wanting a width passes it."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """An empty monitors repository in a temp dir."""
    root = tmp_path / "repo"
    (root / "monitors.d" / "overlays").mkdir(parents=True)
    (root / "system").mkdir()
    return Repo(root)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(args: list[str], *, repo: Repo | None = None, input: str | None = None,
            env: dict[str, str] | None = None) -> Result:
    """Run ``monitors ARGS`` in-process with the real error boundary.

    ``--root`` (and the state dir) of ``repo`` are passed when given. An internal
    error (exit 3) fails the test with the output printed, never swallowed.
    """
    full = (["--root", str(repo.root), "--state-dir", str(repo.state), "--device", "test-box"]
            if repo else []) + args
    runner = CliRunner()
    holder: dict[str, int] = {}

    def invoke() -> None:
        holder["rc"] = cli_main.run(full)

    with runner.isolation(input=input, env=env) as (out, err, *_):
        invoke()
        stdout = out.getvalue().decode()
        stderr = err.getvalue().decode() if err is not None else ""
    result = Result(holder["rc"], stdout, stderr)
    if result.exit_code == 3:
        pytest.fail(f"internal error from monitors {' '.join(args)}:\n{result.output}")
    return result


@pytest.fixture
def cli() -> object:
    """The ``run_cli`` helper as a fixture."""
    return run_cli


def console_script() -> str:
    """Path of the installed ``monitors`` console script next to this interpreter."""
    return str(Path(sys.executable).with_name("monitors"))


os.environ.setdefault("MONITORS_DEVICE", "test-box")
# Daemons started by tests serve no HTTP unless a test asks (many run at once; the
# default 127.0.0.1:8765 would be taken by the first): tests/server sets its own.
os.environ.setdefault("MONITORS_HTTP_LISTEN", "")


def processes_with_arg(arg: str) -> list[int]:
    """Live (not zombie) processes with ``arg`` as one of their argv elements: how a test
    finds what a command left behind (give it a unique argument, ``sleep 333.4217``)."""
    from reconciler import processes

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if arg.encode() in argv and processes.alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def unique_sleep() -> str:
    """A ``sleep`` duration no other process uses (about 333 s), for ``processes_with_arg``.

    The pid is zero-padded to 7 digits (Linux's pid_max is at most 4194304) so that two
    pytest-xdist workers, or a test that appends digits, can never produce the same text."""
    return f"333.{os.getpid():07d}{time.monotonic_ns() % 100000:05d}"


# Hypothesis profiles (tests/config/test_fuzz.py): "default" keeps `make test` to a few
# seconds; `make fuzz` selects "fuzz" (HYPOTHESIS_PROFILE=fuzz) for a long run. A
# deadline per example is how the fuzz test says "never hangs".
hypothesis_settings.register_profile(
    "default", max_examples=400, deadline=timedelta(seconds=5), database=None,
    print_blob=True)
hypothesis_settings.register_profile(
    "fuzz", max_examples=20_000, deadline=timedelta(seconds=10), print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
