"""`monitors remove`, `monitors edit` (a real $EDITOR subprocess) and `monitors layers`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.authoring.conftest import tree_snapshot
from tests.conftest import Repo, console_script, run_cli

MON = "source: {{type: poll, command: {cmd}, interval: 1m}}\naction: {{type: notify}}\n"


def editor(tmp_path: Path, body: str) -> dict[str, str]:
    """An $EDITOR that runs ``body`` with ``path`` bound to the file (argv, no shell)."""
    script = tmp_path / "fake editor.py"  # a space: argv must be split with shlex
    script.write_text("import sys, pathlib\npath = pathlib.Path(sys.argv[1])\n" + body)
    return {"EDITOR": f"'{sys.executable}' '{script}'", "VISUAL": ""}


def test_remove_user_file_and_orphan_overlay(repo: Repo) -> None:
    repo.write("monitors.d/m.yml", MON.format(cmd="date"))
    assert run_cli(["pause", "m"], repo=repo).exit_code == 0
    r = run_cli(["remove", "m"], repo=repo)
    assert r.exit_code == 0 and "removed m: monitors.d/m.yml" in r.stdout
    assert "removed its overlay monitors.d/overlays/m.yml" in r.stdout
    assert list(repo.user.rglob("*.yml")) == []


def test_remove_builtin_says_pause(repo: Repo) -> None:
    repo.write("system/b.yml", MON.format(cmd="date"))
    before = tree_snapshot(repo.root)
    r = run_cli(["remove", "b"], repo=repo)
    assert r.exit_code == 1 and "built-ins cannot be removed" in r.stderr
    assert "monitors pause b" in r.stderr and tree_snapshot(repo.root) == before
    r = run_cli(["remove", "nope"], repo=repo)
    assert r.exit_code == 1 and "no monitor named 'nope'" in r.stderr


def test_remove_shadow_keeps_overlay_and_builtin(repo: Repo) -> None:
    repo.write("system/b.yml", MON.format(cmd="date"))
    repo.write("monitors.d/b.yml", MON.format(cmd="uptime"))
    run_cli(["pause", "b"], repo=repo)
    r = run_cli(["remove", "b"], repo=repo)
    assert r.exit_code == 0 and "the built-in system/b.yml applies again" in r.stdout
    assert (repo.overlays / "b.yml").exists() and (repo.system / "b.yml").exists()


def test_edit_user_file_lints_result(repo: Repo, tmp_path: Path) -> None:
    repo.write("monitors.d/m.yml", MON.format(cmd="date"))
    env = editor(tmp_path, "path.write_text(path.read_text().replace('1m', '2m'))\n")
    r = run_cli(["edit", "m"], repo=repo, env=env)
    assert r.exit_code == 0 and "lint ok" in r.stdout, r.output
    assert "interval: 2m" in (repo.user / "m.yml").read_text()
    env = editor(tmp_path, "path.write_text(path.read_text().replace('2m', 'soon'))\n")
    r = run_cli(["edit", "m"], repo=repo, env=env)
    assert r.exit_code == 1 and "source.interval" in r.stderr and "kept as edited" in r.stderr
    assert "soon" in (repo.user / "m.yml").read_text()  # never lost
    env = editor(tmp_path, "")
    r = run_cli(["edit", "m"], repo=repo, env=env)
    assert r.exit_code == 0 and "no changes" in r.stdout


def test_edit_editor_failure_is_one_line(repo: Repo, tmp_path: Path) -> None:
    repo.write("monitors.d/m.yml", MON.format(cmd="date"))
    r = run_cli(["edit", "m"], repo=repo, env=editor(tmp_path, "sys.exit(3)\n"))
    assert r.exit_code == 1 and "the editor exited with status 3" in r.stderr
    r = run_cli(["edit", "m"], repo=repo, env={"EDITOR": "/no/such/editor", "VISUAL": ""})
    assert r.exit_code == 1 and "cannot start the editor" in r.stderr


def test_edit_builtin_offers_a_shadowing_copy(repo: Repo, tmp_path: Path) -> None:
    repo.write("system/b.yml", MON.format(cmd="date"))
    system_before = (repo.system / "b.yml").read_bytes()
    env = editor(tmp_path, "path.write_text(path.read_text().replace('date', 'uptime'))\n")
    r = run_cli(["edit", "b"], repo=repo, env=env)  # no terminal, no --yes: declined
    assert r.exit_code == 1 and "--yes" in r.stderr
    assert "no longer receive upstream fixes" in r.stderr
    assert not (repo.user / "b.yml").exists()
    r = run_cli(["edit", "b"], repo=repo, env=env, input="n\n")
    assert r.exit_code == 1 and not (repo.user / "b.yml").exists()
    r = run_cli(["edit", "b"], repo=repo, env=env, input="y\n")
    assert r.exit_code == 0, r.output
    copy = (repo.user / "b.yml").read_text()
    assert copy.startswith("# Copied from system/b.yml") and "uptime" in copy
    assert (repo.system / "b.yml").read_bytes() == system_before
    r = run_cli(["layers", "--json"], repo=repo)
    assert json.loads(r.stdout)[0]["kinds"] == ["overridden"]


def test_edit_builtin_unchanged_copy_is_removed(repo: Repo, tmp_path: Path) -> None:
    repo.write("system/b.yml", MON.format(cmd="date"))
    r = run_cli(["edit", "b", "--yes"], repo=repo, env=editor(tmp_path, ""))
    assert r.exit_code == 0 and "removed the copy" in r.stdout
    assert not (repo.user / "b.yml").exists()


@pytest.fixture
def layered(repo: Repo) -> Repo:
    for name in ("same", "diff", "paused", "pinned", "plain"):
        repo.write(f"system/{name}.yml", MON.format(cmd=name))
    repo.write("monitors.d/same.yml", "description: mine\n" + MON.format(cmd="same"))
    repo.write("monitors.d/diff.yml", MON.format(cmd="other"))
    repo.write("monitors.d/user-only.yml", MON.format(cmd="user"))
    assert run_cli(["pause", "paused", "--reason", "noisy"], repo=repo).exit_code == 0
    assert run_cli(["pin", "pinned", "--device", "box"], repo=repo).exit_code == 0
    return repo


def test_layers_report(layered: Repo) -> None:
    r = run_cli(["layers"], repo=layered)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("[OVERRIDDEN]") and "system/diff.yml -> monitors.d/diff.yml" \
        in lines[0] and "no longer follows upstream" in lines[0]
    assert lines[1].startswith("[PAUSED]") and "<- monitors.d/overlays/paused.yml" in lines[1]
    assert "noisy; by Ada Lovelace" in lines[1]
    assert lines[2].startswith("[PINNED]") and "device box" in lines[2]
    assert lines[3].startswith("[UNTOUCHED]") and "system/plain.yml" in lines[3]
    assert lines[4].startswith("[REDUNDANT]") and "delete the user copy" in lines[4]
    assert lines[5] == ("5 built-ins: 1 redundant, 1 overridden, 1 paused, 1 pinned, "
                        "1 untouched")
    assert "user-only" not in r.stdout
    data = {row["monitor"]: row for row in json.loads(run_cli(["layers", "--json"],
                                                              repo=layered).stdout)}
    assert data["plain"]["placement"] == \
        "shared-input built-in: no fleet file, this device is the whole fleet"
    assert data["pinned"]["placement"] == "pinned to box"


# -- no editor and no terminal: fail at once (bug: started vi, which waited forever) -----------


def no_editor_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("EDITOR", "VISUAL")}
    env["MONITORS_DEVICE"] = "test-box"
    return env


def test_edit_without_editor_or_terminal_fails_at_once(repo: Repo) -> None:
    repo.write("monitors.d/m.yml", MON.format(cmd="date"))
    repo.write("system/b.yml", MON.format(cmd="date"))
    before = tree_snapshot(repo.root)
    for name in ("m", "b"):
        p = subprocess.run([console_script(), "--root", str(repo.root), "--state-dir",
                            str(repo.state), "edit", name, "--yes"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           env=no_editor_env(), timeout=60)
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stderr.count("\n") == 1 and "set $EDITOR" in p.stderr, p.stderr
    assert tree_snapshot(repo.root) == before  # no shadowing copy of b either
    r = run_cli(["edit", "m"], repo=repo, env={"EDITOR": "", "VISUAL": ""})
    assert r.exit_code == 1 and "set $EDITOR" in r.stderr


def test_edit_with_editor_and_no_terminal_runs_it(repo: Repo, tmp_path: Path) -> None:
    repo.write("monitors.d/m.yml", MON.format(cmd="date"))
    env = {**no_editor_env(), **editor(tmp_path, "path.write_text(path.read_text()"
                                                 ".replace('1m', '2m'))\n")}
    p = subprocess.run([console_script(), "--root", str(repo.root), "--state-dir",
                        str(repo.state), "edit", "m"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0 and "lint ok" in p.stdout, p.stdout + p.stderr
    assert "interval: 2m" in (repo.user / "m.yml").read_text()


def test_vi_is_the_default_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler import errors
    from reconciler.cli import edit

    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    assert edit.editor_argv(interactive=True) == ["vi"]
    with pytest.raises(errors.UsageError, match="set \\$EDITOR"):
        edit.editor_argv(interactive=False)
    monkeypatch.setenv("EDITOR", "nano -w")
    assert edit.editor_argv(interactive=False) == ["nano", "-w"]
