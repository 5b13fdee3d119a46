from __future__ import annotations

import subprocess

from tests.conftest import console_script, run_cli


def test_help_lists_commands() -> None:
    r = run_cli(["--help"])
    assert r.exit_code == 0
    assert "lint" in r.stdout and "plan" in r.stdout


def test_unknown_command_is_usage_error_exit_1() -> None:
    r = run_cli(["no-such-command"])
    assert r.exit_code == 1
    assert "No such command" in r.output


def test_console_script_and_module_entry() -> None:
    for argv in ([console_script(), "--version"], ["python", "-m", "reconciler", "--version"]):
        if argv[0] == "python":
            import sys

            argv[0] = sys.executable
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert "monitors" in p.stdout
