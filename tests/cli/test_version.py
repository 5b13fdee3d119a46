"""``monitors --version``: answered before the command line loads, the same text as
click's answer, one version for the package metadata, the CLI and ``init``."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import reconciler
from reconciler.cli import start
from tests.conftest import console_script, run_cli

_PROBE = """
import sys
from reconciler.cli import start
try:
    start.entry(["--version"])
except SystemExit as e:
    heavy = sorted(m for m in ("click", "importlib.metadata", "reconciler.cli.main", "yaml")
                   if m in sys.modules)
    print("imported:", heavy, "exit:", e.code)
"""


def test_version_loads_neither_click_nor_package_metadata() -> None:
    p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                       timeout=30, check=True)
    assert p.stdout.splitlines() == ["monitors, version " + reconciler.__version__,
                                     "imported: [] exit: 0"]


def test_the_console_script_and_click_print_the_same_version() -> None:
    fast = subprocess.run([console_script(), "--version"], capture_output=True, text=True,
                          timeout=30, check=True)
    slow = run_cli(["--device", "x", "--version"])  # a global option first: click answers
    assert slow.exit_code == 0
    assert fast.stdout == slow.stdout == start.VERSION_TEXT + "\n"


def test_one_version_for_metadata_cli_and_init() -> None:
    assert metadata.version("monitors") == reconciler.__version__
