"""``monitors service install``: the unit written, and contrib/'s unit agreeing with it."""

from __future__ import annotations

import configparser
import stat

from tests.conftest import ROOT, Repo, run_cli


def service_section(text: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return dict(parser["Service"])


def test_user_unit_is_written_with_notify_watchdog_and_reload(repo: Repo, tmp_path) -> None:
    config = tmp_path / "xdg"
    result = run_cli(["service", "install", "--user"], repo=repo,
                     env={"XDG_CONFIG_HOME": str(config)})
    assert result.exit_code == 0, result.output
    unit = config / "systemd" / "user" / "monitors.service"
    assert f"wrote {unit}" in result.stdout and "systemctl --user daemon-reload" in result.stdout
    assert stat.S_IMODE(unit.stat().st_mode) == 0o644
    service = service_section(unit.read_text())
    assert service["Type"] == "notify"
    assert service["WatchdogSec"] and service["Restart"] == "on-failure"
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert "--log-format json" in service["ExecStart"]
    assert f"--root {repo.root}" in service["ExecStart"]
    assert "User" not in service
    assert "WantedBy=default.target" in unit.read_text()


def test_print_writes_nothing_and_a_system_unit_names_its_user(repo: Repo, tmp_path) -> None:
    result = run_cli(["service", "install", "--print"], repo=repo,
                     env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert result.exit_code == 0
    assert "User=" in result.stdout and "WantedBy=multi-user.target" in result.stdout
    assert not (tmp_path / "xdg").exists()


def test_contrib_unit_has_the_same_service_keys() -> None:
    contrib = service_section((ROOT / "contrib" / "monitors.service").read_text())
    from reconciler.client import service
    from reconciler.settings import load

    made = service_section(service.unit_text(load(root=ROOT, device="x"), user=False,
                                             run_as="monitors"))
    assert sorted(contrib) == sorted(made)
    for key in ("Type", "NotifyAccess", "ExecReload", "Restart", "WatchdogSec", "KillMode"):
        assert contrib[key] == made[key], key


def test_percent_and_dollar_in_the_path_are_literal_in_every_line(tmp_path) -> None:
    # systemd expands %-specifiers in Description= too: '%x' there broke the unit
    root = tmp_path / "my repo%x$HOME"
    (root / "monitors.d").mkdir(parents=True)
    result = run_cli(["--root", str(root), "--device", "box", "service", "install", "--print"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if "my repo" in line]
    assert [line.partition("=")[0] for line in lines] == [
        "Description", "ExecStart", "WorkingDirectory"]
    assert "my repo%%x$HOME)" in lines[0]  # Description= expands no variables
    for line in lines[1:]:
        assert "my repo%%x$$HOME" in line, line
