"""``monitors lint`` and ``monitors schema``: formats, exit codes, in-process and installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Repo, console_script, run_cli

GOOD = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
WARN = "enabled: yes\n" + GOOD
BAD = "source:\n  type: poll\n  command: date\n  intervl: 30s\naction: {type: notify}\n"


def test_clean_repository_exits_0(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 0, r.output
    assert r.stdout == "1 monitor, 0 errors, 0 warnings\n"


def test_warnings_exit_0_unless_strict(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", WARN)
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 0
    assert "host.yml:1:10: warning: enabled:" in r.stdout and "[yaml11-bool]" in r.stdout
    assert r.stdout.splitlines()[-1] == "1 monitor, 0 errors, 1 warning"
    assert run_cli(["lint", "--strict"], repo=repo).exit_code == 1


def test_errors_exit_1_sorted_with_summary(repo: Repo) -> None:
    repo.write("monitors.d/b.yml", BAD)
    repo.write("monitors.d/a.yml", "nope: 1\n" + GOOD)
    repo.write("monitors.d/c.yml", GOOD.replace("hostname", "hosts"))
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert [Path(line.split(":")[0]).name for line in lines[:-1]] == ["a.yml", "b.yml", "b.yml"]
    assert "b.yml:1:1: error: source.interval: missing required field 'interval'" in r.stdout
    assert "b.yml:4:3: error: source.intervl: unknown field 'intervl' (did you mean " \
           "'interval'?) [unknown-field]" in r.stdout
    assert lines[-1] == "3 monitors, 3 errors, 0 warnings"


def test_json_format(repo: Repo) -> None:
    repo.write("monitors.d/b.yml", BAD)
    r = run_cli(["lint", "--format", "json"], repo=repo)
    assert r.exit_code == 1
    rows = json.loads(r.stdout)
    assert {tuple(sorted(row)) for row in rows} == {
        ("column", "field", "file", "line", "message", "rule", "severity")}
    assert {(row["line"], row["column"], row["rule"], row["field"]) for row in rows} == {
        (1, 1, "schema", "source.interval"), (4, 3, "unknown-field", "source.intervl")}


def test_json_format_clean_is_empty_list(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    r = run_cli(["lint", "--format", "json"], repo=repo)
    assert (r.exit_code, json.loads(r.stdout)) == (0, [])
    r = run_cli(["lint", "--json"], repo=repo)  # the --json every command has
    assert (r.exit_code, json.loads(r.stdout)) == (0, [])


def test_github_format(repo: Repo) -> None:
    repo.write("monitors.d/b.yml", BAD)
    repo.write("monitors.d/w.yml", WARN)
    r = run_cli(["lint", "--format", "github"], repo=repo)
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0].startswith("::error file=") and ",line=1,col=1,title=schema::" in lines[0]
    assert lines[0].endswith("::source.interval: missing required field 'interval' in source")
    assert any(line.startswith("::warning file=") and "title=yaml11-bool" in line
               for line in lines)
    assert lines[-1] == "2 monitors, 2 errors, 1 warning"


def test_paths_lint_only_those_files(repo: Repo) -> None:
    good = repo.write("monitors.d/host.yml", GOOD)
    repo.write("monitors.d/b.yml", BAD)
    r = run_cli(["lint", str(good)], repo=repo)
    assert (r.exit_code, r.stdout) == (0, "1 monitor, 0 errors, 0 warnings\n")


def test_lint_with_no_repository_and_no_paths(tmp_path: Path) -> None:
    p = subprocess.run([console_script(), "lint"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env=_env())
    assert p.returncode == 1 and "no monitors repository" in p.stderr
    assert "Traceback" not in p.stderr


def test_unknown_format_is_usage_error_exit_1(repo: Repo) -> None:
    r = run_cli(["lint", "--format", "xml"], repo=repo)
    assert r.exit_code == 1 and "xml" in r.output


def test_schema_command_prints_schemas() -> None:
    r = run_cli(["schema"])
    assert r.exit_code == 0 and json.loads(r.stdout)["title"] == "monitor"
    r = run_cli(["schema", "--overlay"])
    assert r.exit_code == 0 and json.loads(r.stdout)["title"] == "overlay"
    r = run_cli(["schema", "--settings"])
    assert r.exit_code == 0 and json.loads(r.stdout)["title"] == "monitors.toml"
    r = run_cli(["schema", "--fleet"])
    assert r.exit_code == 0 and json.loads(r.stdout)["title"] == "fleet"
    r = run_cli(["schema", "--fleet", "--settings"])
    assert r.exit_code == 1 and "at most one of" in r.stderr


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MONITORS_ROOT", None)
    return env


def test_console_script_outside_a_repository_lints_given_files(tmp_path: Path) -> None:
    (tmp_path / "host.yml").write_text(GOOD)
    (tmp_path / "bad.yml").write_bytes(b"source: caf\xe9\n")
    p = subprocess.run([console_script(), "lint", "host.yml", "bad.yml"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, env=_env())
    assert p.returncode == 1, p.stderr
    assert p.stdout.splitlines() == [
        "bad.yml:1:12: error: not UTF-8 (byte 0xe9); save the file as UTF-8 [encoding]",
        "2 monitors, 1 error, 0 warnings",
    ]


@pytest.mark.parametrize(("text", "code"), [(GOOD, 0), (WARN, 0), (BAD, 1)])
def test_console_script_exit_codes(repo: Repo, text: str, code: int) -> None:
    repo.write("monitors.d/m.yml", text)
    p = subprocess.run([console_script(), "--root", str(repo.root), "lint", "--format", "json"],
                       capture_output=True, text=True, timeout=60, env=_env())
    assert p.returncode == code, p.stderr
    assert isinstance(json.loads(p.stdout), list)


def test_console_script_never_tracebacks_on_hostile_files(repo: Repo) -> None:
    hostile = {
        "bomb.yml": "a: &a [" + ",".join(["x"] * 50) + "]\n"
        + "".join(f"{c}: &{c} [" + ",".join([f"*{p}"] * 50) + "]\n"
                  for p, c in zip("abcdef", "bcdefg", strict=True)),
        "rec.yml": "a: &a [*a]\n",
        "deep.yml": "a: " + "[" * 3000 + "]" * 3000 + "\n",
        "tag.yml": "a: !!python/name:os.system\n",
        "list.yml": "- 1\n",
        "null.yml": "~\n",
        "keys.yml": "? [a, b]\n: 1\n",
        "strange.yml": "source: {type: poll, command: [1, 2], interval: -5}\naction: {type: 7}\n",
    }
    for name, text in hostile.items():
        repo.write(f"monitors.d/{name}", text)
    repo.write("monitors.d/overlays/x.yml", "- not a mapping\n")
    (repo.user / "big.yml").write_bytes(b"#" * (1024 * 1024 + 10))
    p = subprocess.run([console_script(), "--root", str(repo.root), "lint"],
                       capture_output=True, text=True, timeout=60, env=_env())
    assert p.returncode == 1
    assert "Traceback" not in p.stderr and p.stderr == ""
    assert p.stdout.splitlines()[-1].startswith("9 monitors, ")


def test_lint_imports_no_http_client_or_asyncio(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    code = (
        "import sys\n"
        "from reconciler.cli import main\n"
        f"rc = main.run(['--root', {str(repo.root)!r}, 'lint'])\n"
        "heavy = {'httpx', 'asyncio', 'jinja2', 'jsonschema', 'git', 'watchdog', 'apprise'}\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stderr


def test_lint_with_a_channel_imports_no_asyncio_once_its_url_is_known(repo: Repo) -> None:
    """A channel's URL is checked by Apprise once (then cached): the lint after that
    loads neither Apprise nor the child process that sends through it (asyncio)."""
    repo.write("monitors.d/host.yml", GOOD)
    repo.write("monitors.toml", '[channels.ops]\nurl = "json://127.0.0.1:9/hook"\n')
    code = (
        "import sys\n"
        "from reconciler.cli import main\n"
        f"rc = main.run(['--root', {str(repo.root)!r}, 'lint'])\n"
        "heavy = {'httpx', 'asyncio', 'jinja2', 'jsonschema', 'git', 'watchdog', 'apprise'}\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    for _ in range(2):  # the first run fills the URL cache
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr


def test_action_references_are_checked_against_monitors_toml(repo: Repo) -> None:
    repo.write("monitors.d/a.yml", GOOD.replace("{type: notify}",
                                                "{type: run, agent: cluade, prompt: x}"))
    repo.write("monitors.d/b.yml", GOOD.replace("{type: notify}",
                                                "{type: routine, routine: triage}"))
    repo.write("monitors.d/c.yml", GOOD.replace("{type: notify}",
                                                "{type: notify, channel: phone}"))
    repo.write("monitors.d/d.yml", GOOD.replace("{type: notify}", "{type: run, prompt: x}"))
    repo.write("monitors.d/e.yml", GOOD.replace(
        "{type: notify}", "{type: run, command: [echo, '--msg={prompt}'], prompt: x}"))
    r = run_cli(["lint", "--format", "json"], repo=repo)
    found = {(Path(row["file"]).name, row["field"], row["rule"]) for row in json.loads(r.stdout)}
    assert found == {
        ("a.yml", "action.agent", "unknown-reference"),
        ("b.yml", "action.routine", "unknown-reference"),
        ("c.yml", "action.channel", "unknown-reference"),
        ("d.yml", "action", "schema"),
        ("e.yml", "action.command", "bad-command"),
    }
    (repo.root / "monitors.toml").write_text(
        '[agents.cluade]\nargv = ["claude", "-p", "{prompt}"]\n'
        '[routines.triage]\nargv = ["echo", "{prompt}"]\n'
        '[channels.phone]\nurl = "json://127.0.0.1:9/x"\n')
    r = run_cli(["lint", "--format", "json"], repo=repo)
    found = {(Path(row["file"]).name, row["rule"]) for row in json.loads(r.stdout)}
    assert found == {("d.yml", "schema"), ("e.yml", "bad-command")}


def test_invalid_monitors_toml_sections_are_one_problem(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text('[agents.x]\nargv = "not a list"\n')
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    assert ("monitors.toml:2:8: error: agents.x.argv: expected list, got string: "
            "'not a list' [schema]") in r.stdout


def test_a_schema_error_in_monitors_toml_hides_no_other_problem(repo: Repo) -> None:
    """Unknown references and a [channels.log] redefinition were reported only once the
    schema error (devce) was fixed: a second round."""
    repo.write("monitors.d/c.yml", GOOD.replace("{type: notify}",
                                                "{type: notify, channel: opz}"))
    repo.write("monitors.d/a.yml", GOOD.replace("{type: notify}",
                                                "{type: run, agent: nope, prompt: x}"))
    repo.write("monitors.d/ok.yml", GOOD.replace("{type: notify}",
                                                 "{type: notify, channel: ops}"))
    (repo.root / "monitors.toml").write_text(
        'devce = "x"\n[channels.log]\nurl = "json://127.0.0.1:9/"\n'
        '[channels.ops]\nurl = "json://127.0.0.1:9/"\nmaxAttempts = "3"\n')
    r = run_cli(["lint", "--format", "json"], repo=repo)
    found = {(Path(row["file"]).name, row["line"], row["field"], row["rule"])
             for row in json.loads(r.stdout)}
    assert found == {
        ("monitors.toml", 1, "devce", "unknown-field"),
        ("monitors.toml", 2, "channels.log", "settings"),
        ("monitors.toml", 6, "channels.ops.maxAttempts", "schema"),  # once, not twice
        ("c.yml", 2, "action.channel", "unknown-reference"),
        ("a.yml", 2, "action.agent", "unknown-reference"),
    }
    # plan still refuses the invalid monitors.toml in one line
    plan = run_cli(["plan"], repo=repo)
    assert plan.exit_code == 1 and "devce" in plan.stderr


def test_unknown_template_variable(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD.replace("{type: notify}",
                                                   "{type: notify, message: '{{ evnt }}'}"))
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    assert "action.message: invalid template: unknown variable 'evnt'" in r.stdout
    assert "[bad-template]" in r.stdout


def test_pre_commit_hook_definition() -> None:
    import re

    import yaml

    root = ROOT
    hooks = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == "monitors-lint"]
    assert hook["entry"] == "monitors lint" and hook["language"] == "python"
    pattern = re.compile(hook["files"])
    assert pattern.search("monitors.d/ci-red.yml") and pattern.search("system/disk.yaml")
    assert pattern.search("monitors.d/overlays/ci-red.yml")
    assert pattern.search("monitors.toml") and pattern.search("fleet.yaml")
    assert set(hook["types_or"]) == {"yaml", "toml"} and "types" not in hook
    assert not pattern.search("tests/examples/valid/ci-red.yml")
    assert not pattern.search("pyproject.toml") and not pattern.search("x/monitors.toml")


def test_a_root_without_a_user_layer_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli(["--root", str(empty), "lint"])  # said "0 monitors, 0 errors", exit 0
    assert r.exit_code == 1, r.output
    first, summary = r.stdout.splitlines()
    assert first == (f"{empty / 'monitors.d'}:1:1: error: the user layer directory monitors.d/ "
                     "does not exist (create it, or set [layers] user in monitors.toml) "
                     "[missing-layer]")
    assert summary == "0 monitors, 1 error, 0 warnings"
    (empty / "monitors.d").mkdir()  # an existing but empty layer is fine
    assert run_cli(["--root", str(empty), "lint"]).stdout == "0 monitors, 0 errors, 0 warnings\n"


@pytest.mark.parametrize("key", ["user", "system", "overlays"])
def test_a_configured_layer_that_does_not_exist_is_an_error(repo: Repo, key: str) -> None:
    repo.write("system/host.yml", GOOD)
    repo.write("monitors.toml", f'[layers]\n{key} = "nope.d"\n')
    r = run_cli(["lint"], repo=repo)  # linted clean while the layer was ignored
    assert r.exit_code == 1, r.output
    assert f"monitors.toml:1:1: error: layers.{key}: directory nope.d does not exist " \
           "[missing-layer]" in r.stdout
    rows = json.loads(run_cli(["lint", "--json"], repo=repo).stdout)
    assert [(row["rule"], row["field"]) for row in rows if row["severity"] == "error"] == [
        ("missing-layer", f"layers.{key}")]
    (repo.root / "nope.d").write_text("a file, not a directory")
    assert "directory nope.d is not a directory [missing-layer]" in run_cli(
        ["lint"], repo=repo).stdout
    (repo.root / "nope.d").unlink()
    (repo.root / "nope.d").mkdir()
    assert run_cli(["lint"], repo=repo).exit_code == 0


def test_default_system_and_overlays_layers_may_be_missing(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.overlays).rmdir()
    repo.system.rmdir()  # built-ins arrive with `system pull`, overlays with the first pause
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 0, r.output
    assert r.stdout == "1 monitor, 0 errors, 0 warnings\n"


def test_linting_paths_does_not_report_missing_layers(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "monitors.d").mkdir(parents=True)
    path = root / "monitors.d" / "host.yml"
    path.write_text(GOOD)
    (root / "monitors.toml").write_text('[layers]\nsystem = "nope.d"\n')
    r = run_cli(["--root", str(root), "lint", str(path)])
    assert r.exit_code == 0, r.output


def test_monitors_toml_typos_are_reported_with_positions(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    (repo.root / "monitors.toml").write_text(
        'devce = "x"\n[daemon]\nresyncc = "10s"\n[agentz.foo]\nargv = ["a"]\n')
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    lines = [line.split("monitors.toml:", 1)[1] for line in r.stdout.splitlines()
             if "monitors.toml:" in line]
    assert lines == [
        "1:1: error: devce: unknown field 'devce' (did you mean 'device'?) [unknown-field]",
        "3:1: error: daemon.resyncc: unknown field 'resyncc' (did you mean 'resync'?) "
        "[unknown-field]",
        "4:2: error: agentz: unknown field 'agentz' (did you mean 'agents'?) [unknown-field]",
    ]


def test_fleet_file_is_linted_even_when_no_monitor_names_a_device(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", GOOD)
    repo.write("fleet.yaml", "devices:\n  - name: a\n    adress: 'h:1'\n")
    r = run_cli(["lint", "--format", "json"], repo=repo)
    assert r.exit_code == 1
    [row] = json.loads(r.stdout)
    assert (Path(row["file"]).name, row["line"], row["column"], row["field"], row["rule"]) == (
        "fleet.yaml", 3, 5, "devices.0.adress", "unknown-field")
    assert "did you mean 'address'?" in row["message"]


def test_settings_files_given_as_paths_are_checked_not_linted_as_monitors(repo: Repo) -> None:
    """pre-commit passes monitors.toml and fleet.yaml when they change."""
    repo.write("monitors.d/host.yml", GOOD)
    repo.write("fleet.yaml", "devices:\n  - name: a\n")
    (repo.root / "monitors.toml").write_text("[daemon]\nresync = '1m'\n")
    r = run_cli(["lint", str(repo.root / "monitors.toml"), str(repo.root / "fleet.yaml")],
                repo=repo)
    assert r.exit_code == 0, r.output
    (repo.root / "monitors.toml").write_text("[daemon]\nresyncc = '1m'\n")
    r = run_cli(["lint", str(repo.root / "monitors.toml")], repo=repo)
    assert r.exit_code == 1 and "daemon.resyncc: unknown field" in r.stdout


def test_identical_files_print_a_bounded_line_each(repo: Repo) -> None:
    """2,000 identical files: one duplicate error per file naming three others and
    counting the rest, so the output grows with the files, not with their square."""
    for i in range(2000):
        repo.write(f"monitors.d/same-{i:04d}.yml", GOOD)
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1
    lines = r.stdout.replace(f"{repo.root}/", "").splitlines()
    assert lines[-1] == "2000 monitors, 2000 errors, 0 warnings"
    assert len(lines) == 2001 and max(len(line) for line in lines) < 400
    first = lines[0]
    assert first.startswith("monitors.d/same-0000.yml:1:1: error: source: same source")
    assert ("as same-0001 (monitors.d/same-0001.yml), same-0002 (monitors.d/same-0002.yml), "
            "same-0003 (monitors.d/same-0003.yml) and 1,996 more: one trigger") in first
    assert "same-0001 (monitors.d/same-0001.yml)" not in lines[1]
    assert "same-0000 (monitors.d/same-0000.yml), same-0002" in lines[1]
