from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reconciler import errors, settings
from reconciler.config.authoring import arguments
from tests.conftest import ROOT, console_script, run_cli


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


# -- global options after the command, MONITORS_ROOT, device names ----------------------------


@pytest.mark.parametrize(("args", "option", "hint"), [
    (["list", "--root", "X"], "--root", "monitors --root X list"),
    (["list", "--json", "--root=X"], "--root", "monitors --root=X list --json"),
    (["system", "pull", "--state-dir", "/tmp/s"], "--state-dir",
     "monitors --state-dir /tmp/s system pull"),
    (["view", "m", "--device", "box"], "--device", "monitors --device box view m"),
])
def test_global_option_after_the_command_gets_a_hint(args: list[str], option: str,
                                                     hint: str) -> None:
    r = run_cli(args)
    assert r.exit_code == 1
    assert f"No such option '{option}'" in r.stderr
    assert f"hint: global options go before the command: {hint}\n" in r.stderr


def test_other_unknown_options_get_no_hint() -> None:
    r = run_cli(["list", "--bogus"])
    assert r.exit_code == 1 and "No such option '--bogus'" in r.stderr
    assert "hint" not in r.stderr


def test_bad_root_names_its_source_and_path(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    r = run_cli(["lint"], env={"MONITORS_ROOT": str(missing)})
    assert r.exit_code == 1
    assert r.stderr == f"error: {missing} (from MONITORS_ROOT): no such directory\n"
    r = run_cli(["--root", str(missing), "lint"])
    assert r.stderr == f"error: {missing} (from --root): no such directory\n"


@pytest.mark.parametrize("device", ["", "bad name/../x", "-lead", "x" * 64, "a/b"])
def test_invalid_device_name_is_refused(device: str, tmp_path: Path) -> None:
    r = run_cli(["--root", str(tmp_path), "--device", device, "list"])
    assert r.exit_code == 1
    assert r.stderr == (f"error: --device: {device!r} is not a valid device name: letters, "
                        "digits, '.', '_' and '-', starting with a letter or digit, at most 63 "
                        "characters\n")
    r = run_cli(["--root", str(tmp_path), "list"], env={"MONITORS_DEVICE": device or "a b"})
    assert r.exit_code == 1 and r.stderr.startswith("error: MONITORS_DEVICE: ")


def test_device_from_monitors_toml_is_checked(tmp_path: Path) -> None:
    (tmp_path / "monitors.toml").write_text('device = "bad name"\n')
    with pytest.raises(errors.ConfigError, match=r"monitors\.toml: device: 'bad name' is not"):
        settings.load(root=tmp_path)
    (tmp_path / "monitors.toml").write_text('device = "build-box.1"\n')
    assert settings.load(root=tmp_path).device == "build-box.1"
    assert settings.load(root=tmp_path, device="").device == "build-box.1"


def test_device_pattern_is_the_fleet_schema_pattern() -> None:
    schema = json.loads((ROOT / "reconciler/schemas/fleet.schema.json").read_text())
    pattern = schema["properties"]["devices"]["items"]["properties"]["name"]["pattern"]
    assert pattern == settings.DEVICE_PATTERN
    assert arguments.DEVICE_RE.pattern == pattern


def test_view_refuses_a_negative_fire_count() -> None:
    r = run_cli(["view", "x", "--fires", "-1"])
    assert r.exit_code == 1
    assert "-1 is not in the range" in r.output
