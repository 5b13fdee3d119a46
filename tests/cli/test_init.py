"""``monitors init [DIR]``: a new repository that lints clean; a second run changes nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from reconciler.config import scaffold
from tests.conftest import ROOT, run_cli


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def new(tmp_path: Path) -> Path:
    target = tmp_path / "fresh"
    r = run_cli(["init", str(target)])
    assert r.exit_code == 0, r.output
    assert "Initialised a monitors repository" in r.stdout
    return target


def test_writes_the_files(new: Path) -> None:
    assert sorted(_tree(new)) == sorted([
        ".github/workflows/monitors.yml", ".gitignore", ".pre-commit-config.yaml",
        "monitors.d/example.yml", "monitors.toml", "schemas/monitor.schema.json",
        "schemas/overlay.schema.json"])


def test_the_new_repository_lints_clean_and_plans(new: Path) -> None:
    r = run_cli(["--root", str(new), "--state-dir", str(new / ".history"), "lint"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "1 monitor, 0 errors, 0 warnings\n"
    r = run_cli(["--root", str(new), "--state-dir", str(new / ".history"), "plan"])
    assert r.exit_code == 0, r.output
    assert "+ example will be started" in r.stdout


def test_example_carries_a_modeline_that_resolves(new: Path) -> None:
    first = (new / "monitors.d/example.yml").read_text().splitlines()[0]
    prefix = "# yaml-language-server: $schema="
    assert first.startswith(prefix)
    schema = (new / "monitors.d" / first[len(prefix):]).resolve()
    assert schema == (new / "schemas/monitor.schema.json").resolve() and schema.is_file()


def test_second_run_changes_nothing(new: Path) -> None:
    before = _tree(new)
    r = run_cli(["init", str(new)])
    assert r.exit_code == 0, r.output
    assert "nothing changed" in r.stdout
    assert _tree(new) == before


def test_refuses_to_overwrite_and_writes_nothing(new: Path) -> None:
    (new / "monitors.toml").write_text("device = 'mine'\n")
    (new / "monitors.d/example.yml").write_text("# mine\n")
    (new / ".pre-commit-config.yaml").unlink()
    before = _tree(new)
    r = run_cli(["init", str(new)])
    assert r.exit_code == 1
    assert r.stderr == (f"error: {new}: refusing to overwrite monitors.d/example.yml, "
                        "monitors.toml (they differ from what `monitors init` writes); "
                        "nothing written\n")
    assert _tree(new) == before


def test_an_existing_gitignore_gets_the_state_line_appended(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.pyc")
    r = run_cli(["init", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "~ .gitignore" in r.stdout
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n/.history/\n"
    assert run_cli(["init", str(tmp_path)]).stdout.endswith("nothing changed.\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_keeps_the_state_directory_out_of_git(new: Path) -> None:
    subprocess.run(["git", "init", "-q", str(new)], check=True)
    run_cli(["--root", str(new), "--state-dir", str(new / ".history"), "lint"])
    (new / ".history").mkdir(exist_ok=True)
    (new / ".history/running.json").write_text("{}")
    ignored = subprocess.run(["git", "-C", str(new), "check-ignore", "-q",
                              ".history/running.json"])
    assert ignored.returncode == 0
    kept = subprocess.run(["git", "-C", str(new), "check-ignore", "-q", "monitors.d/example.yml"])
    assert kept.returncode == 1


def test_pre_commit_config_runs_this_projects_hook(new: Path) -> None:
    ours = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    config = yaml.safe_load((new / ".pre-commit-config.yaml").read_text())
    (hook,) = config["repos"][0]["hooks"]
    assert hook["id"] == scaffold.HOOK_ID and hook["id"] in ours
    shipped = ours[hook["id"]]
    for key in ("name", "entry", "files", "types_or", "require_serial"):
        assert hook.get(key) == shipped.get(key), key
    assert config["repos"][0]["repo"] == "local" and hook["language"] == "system"


def test_ci_workflow_lints_with_annotations_then_plans(new: Path) -> None:
    path = new / ".github/workflows/monitors.yml"
    workflow = yaml.safe_load(path.read_text())
    steps = [s.get("run", "") for s in workflow["jobs"]["lint-and-plan"]["steps"]]
    lint = steps.index("monitors lint --format github")
    assert steps.index("monitors plan") > lint
    checker = str(Path(sys.executable).with_name("check-jsonschema"))
    if not Path(checker).exists():
        pytest.skip("check-jsonschema (dev dependency) not installed")
    proc = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_file_in_the_way_of_the_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    r = run_cli(["init", str(tmp_path / "f")])
    assert r.exit_code == 1
    assert r.stderr == f"error: {tmp_path / 'f'}: not a directory\n"


@pytest.mark.parametrize("umask, files, dirs", [(0o000, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_init_under_any_umask_makes_a_repository_monitors_trusts(
        tmp_path: Path, umask: int, files: int, dirs: int) -> None:
    """``umask 000`` would make every file world-writable, which ``config.trust``
    refuses; a stricter umask stays stricter."""
    target = tmp_path / "fresh"
    p = subprocess.run([sys.executable, "-c", f"import os; os.umask({umask}); "
                        "from reconciler.cli import main; main.entry()", "init", str(target)],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    made = [target, *target.rglob("*")]
    assert {oct(p.stat().st_mode & 0o777) for p in made if p.is_dir()} == {oct(dirs)}
    assert {oct(p.stat().st_mode & 0o777) for p in made if p.is_file()} == {oct(files)}
    r = run_cli(["--root", str(target), "--state-dir", str(target / ".history"), "lint"])
    assert r.exit_code == 0, r.output


def test_the_settings_template_names_every_section_and_uncommented_is_valid(new: Path) -> None:
    # [http] and [git] arrived without a line in the template `init` writes
    import json
    import re
    import tomllib

    from reconciler.config import schemas

    text = (new / "monitors.toml").read_text()
    named = set(re.findall(r"^# \[(\w+)", text, re.M)) | set(
        re.findall(r"^# (\w+) = ", text, re.M))
    schema = json.loads((ROOT / "reconciler/schemas/settings.schema.json").read_text())
    assert set(schema["properties"]) <= named
    uncommented = "\n".join(line[2:] for line in text.splitlines()
                            if re.match(r"# (\[|\w+ = )", line))
    assert schemas.validator("settings").is_valid(tomllib.loads(uncommented))
