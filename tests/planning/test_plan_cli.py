"""``monitors plan`` through the CLI on a temp repository without a daemon."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import factories
from tests.conftest import ROOT, Repo, run_cli

MON = factories.ECHO_MONITOR


def test_plan_without_daemon(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    repo.write("monitors.d/beta.yml", MON.format(word="beta") + "device: box-2\n")
    repo.write("monitors.d/gamma.yml", MON.format(word="gamma"))
    repo.write("monitors.d/overlays/gamma.yml",
               "monitor: gamma\npause:\n  reason: too loud\n")
    repo.write("monitors.d/delta.yml", MON.format(word="delta"))
    repo.write("monitors.d/overlays/delta.yml",
               "monitor: delta\npause:\n  until: '2020-01-01T00:00:00Z'\n")
    repo.write("monitors.d/broken.yml", "source: [unclosed\n")
    r = run_cli(["plan"], repo=repo)
    assert r.exit_code == 1, r.output  # broken.yml has an error: Terraform's errors -> 1
    out = r.stdout
    assert "The daemon is not running: running state is empty" in out
    assert "+ alpha will be started: new file monitors.d/alpha.yml" in out
    assert "+ delta will be started: pause expired at 2020-01-01T00:00:00Z " \
           "(monitors.d/overlays/delta.yml)" in out
    assert "beta: owner is box-2: pinned to box-2" in out
    assert 'gamma: paused by overlay' in out and 'reason "too loud"' in out
    assert "broken: file is invalid, never applied: " in out
    assert "\x1b[" not in out
    assert out.rstrip().endswith(
        "Plan: 2 to start, 0 to replace, 0 to update, 0 to stop, 0 unchanged. "
        "1 file has errors (`monitors lint` shows them).")

    assert run_cli(["plan", "--detailed-exitcode"], repo=repo).exit_code == 1
    doc = json.loads(run_cli(["plan", "--json"], repo=repo).stdout)
    assert doc["format"] == "monitors-plan" and doc["version"] == 1
    assert doc["daemon"]["running"] is False and doc["generation"] == 0
    assert {c["name"]: c["action"] for c in doc["changes"]} == {"alpha": "start",
                                                                "delta": "start"}
    assert doc["digest"].startswith("sha256:")

    out_file = repo.root / "saved.json"
    r = run_cli(["plan", "--out", str(out_file)], repo=repo)
    assert r.exit_code == 1 and "Saved the plan" in r.stdout
    saved = json.loads(out_file.read_text())
    assert saved["desiredDigest"] == doc["desiredDigest"]
    assert saved["commit"] is None  # not a git checkout


def test_plan_with_nothing_is_no_changes(repo: Repo) -> None:
    r = run_cli(["plan", "--detailed-exitcode"], repo=repo)
    assert r.exit_code == 0
    assert "No changes. 0 monitors run as the repository says." in r.stdout


def test_plan_exits_1_when_files_have_errors_and_still_plans_the_rest(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    for i in range(15):
        repo.write(f"monitors.d/broken{i:02d}.yml", "source: [unclosed\n")
    r = run_cli(["plan"], repo=repo)
    assert r.exit_code == 1, r.output
    assert "+ alpha will be started" in r.stdout
    assert "broken00: file is invalid, never applied: " in r.stdout
    assert r.stdout.rstrip().endswith(
        "Plan: 1 to start, 0 to replace, 0 to update, 0 to stop, 0 unchanged. "
        "15 files have errors (`monitors lint` shows them).")
    assert run_cli(["plan", "--detailed-exitcode"], repo=repo).exit_code == 1
    doc = json.loads(run_cli(["plan", "--json"], repo=repo).stdout)
    assert len(doc["errorFiles"]) == 15


def test_plan_detailed_exitcode_on_a_clean_repo(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    assert run_cli(["plan"], repo=repo).exit_code == 0
    assert run_cli(["plan", "--detailed-exitcode"], repo=repo).exit_code == 2


def test_shipped_monitors_lint_and_plan_clean(tmp_path: Path) -> None:
    """`make run` runs `monitors lint` and `monitors plan` on the shipped monitors."""
    root = tmp_path / "shipped"
    shutil.copytree(ROOT / "monitors.d", root / "monitors.d")
    shutil.copytree(ROOT / "system", root / "system")
    args = ["--root", str(root), "--state-dir", str(tmp_path / "state")]
    assert run_cli([*args, "lint"]).exit_code == 0
    r = run_cli([*args, "plan"])
    assert r.exit_code == 0, r.output
    assert "files have errors" not in r.stdout and "file has errors" not in r.stdout


def test_duplicate_fingerprints_plan_one_and_hold_the_other(repo: Repo) -> None:
    repo.write("monitors.d/d1.yml", MON.format(word="same"))
    repo.write("monitors.d/d2.yml", MON.format(word="same"))
    r = run_cli(["plan", "--json"], repo=repo)
    assert r.exit_code == 1  # lint's duplicate-fingerprint error
    doc = json.loads(r.stdout)
    assert [(c["name"], c["action"]) for c in doc["changes"]] == [("d1", "start")]
    assert doc["excluded"] == [{"name": "d2", "kind": "duplicate", "reason":
                                "duplicate of d1 (same fingerprint); set allowDuplicate: "
                                "true if deliberate"}]
    text = run_cli(["plan"], repo=repo).stdout
    assert "d2: duplicate of d1 (same fingerprint); set allowDuplicate: true if deliberate" \
        in text
    listing = json.loads(run_cli(["list", "--json"], repo=repo).stdout)
    row = next(m for m in listing["monitors"] if m["name"] == "d2")
    assert row["status"] == "duplicate (held)" and row["reason"].startswith("duplicate of d1")
    assert "d2" in run_cli(["list"], repo=repo).stdout


def test_apply_without_a_terminal_shows_the_plan_and_refuses(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    r = run_cli(["apply"], repo=repo, input="")  # CliRunner's stdin is not a terminal
    assert r.exit_code == 1
    assert "+ alpha will be started" in r.stdout
    assert r.stderr.strip() == ("error: no terminal to confirm on: pass --yes to apply "
                                "without asking")
    assert not (repo.state / "daemon.log").exists()  # no daemon was started
    assert not (repo.state / "running.json").exists()
    as_json = run_cli(["apply", "--json"], repo=repo)
    assert as_json.exit_code == 1 and "no terminal to confirm on" in as_json.stderr
    assert json.loads(as_json.stdout)["format"] == "monitors-plan"
    assert not (repo.state / "daemon.log").exists()


def test_apply_with_an_unwritable_state_dir_is_one_line(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    # root ignores permission bits, so make the daemon log unwritable another way
    (repo.state / "daemon.log").mkdir(parents=True)
    r = run_cli(["apply", "--yes"], repo=repo)  # an OSError here used to be a traceback
    assert r.exit_code == 1, r.output
    [line] = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {repo.state / 'daemon.log'}: cannot write the daemon log:")
    assert "--state-dir" in line and "Traceback" not in r.output


def test_state_dir_below_a_file_is_one_line_everywhere(repo: Repo, tmp_path: Path) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    state = ["--root", str(repo.root), "--state-dir", str(blocker / "state")]
    for args in (["plan"], ["apply", "--yes"], ["list"], ["view", "alpha"], ["run", "--once"]):
        r = run_cli([*state, *args])  # run_cli fails the test on a traceback (exit 3)
        assert r.exit_code == 1, (args, r.output)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    for args in (["runs", "alpha"], ["logs", "alpha"]):  # nothing to read: no fires
        r = run_cli([*state, *args])
        assert r.exit_code == 0 and r.stdout == "alpha: no fires yet\n", (args, r.output)


def test_view_shows_durations_and_json_keeps_seconds(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha") + "rateLimit: {max: 5, per: 1m}\n")
    r = run_cli(["view", "alpha"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "    interval: 30s\n" in r.stdout and "interval: 30.0" not in r.stdout
    assert "  rate limit: 5 per 1m\n" in r.stdout
    doc = json.loads(run_cli(["view", "alpha", "--json"], repo=repo).stdout)
    assert doc["config"]["source"]["interval"] == 30.0
    assert doc["config"]["rateLimit"] == {"max": 5, "per": 60.0}


def test_list_fits_100_columns_and_wide_and_json_keep_everything(repo: Repo) -> None:
    long_cmd = "[sh, -c, 'gh pr checks 1119 --json name,bucket --jq .[].bucket | sort | uniq']"
    repo.write("monitors.d/a-rather-long-monitor-name.yml",
               "source:\n  type: poll\n  command: " + long_cmd + "\n  interval: 30s\n"
               "condition:\n  mode: match\n  match: 'fail|error|cancelled'\n"
               "action:\n  type: webhook-out\n  url: https://hooks.example.com/services/T000/B000/"
               "XXXXXXXXXXXXXXXXXXXXXXXX\n")
    repo.write("monitors.d/other.yml", MON.format(word="x") + "device: box-2\n")
    r = run_cli(["list"], repo=repo, env={"COLUMNS": "100"})
    assert r.exit_code == 0
    table = r.stdout.split("\n\n")[0].splitlines()
    assert max(len(line) for line in table) <= 100, r.stdout
    assert table[0].split() == ["NAME", "STATUS", "SOURCE", "ACTION"]
    assert "…" in r.stdout and "every 30s" in r.stdout
    assert "    never polled" in r.stdout and "owner box-2" in r.stdout
    wide = run_cli(["list", "--wide"], repo=repo).stdout
    assert "CONDITION" in wide.splitlines()[0] and "match /fail|error|cancelled/" in wide
    doc = json.loads(run_cli(["list", "--json"], repo=repo).stdout)
    row = doc["monitors"][0]
    assert set(row) >= {"name", "source", "condition", "action", "owner", "livenessText"}
    assert row["source"].startswith("poll: sh -c gh pr checks")


TOML_ERRORS = {
    "channel-attempts": ('[channels.phone]\nurl = "json://localhost"\nmaxAttempts = 50\n',
                         "monitors.toml:3:15: channels.phone.maxAttempts: 50 is greater than "
                         "the maximum of 20"),
    "owner-ghost": ('[owner]\nchannels = ["ghost"]\n',
                    "monitors.toml:2:1: owner.channels: unknown channel 'ghost'"),
    "unknown-key": ('[daemon]\nresyncc = "10s"\n',
                    "monitors.toml:2:1: daemon.resyncc: unknown field 'resyncc' (did you mean "
                    "'resync'?)"),
}


@pytest.mark.parametrize("case", sorted(TOML_ERRORS))
def test_plan_and_apply_refuse_an_invalid_monitors_toml(repo: Repo, case: str) -> None:
    toml, message = TOML_ERRORS[case]
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    repo.write("monitors.d/beta.yml", MON.format(word="beta"))
    repo.write("monitors.toml", toml)
    assert run_cli(["lint"], repo=repo).exit_code == 1
    r = run_cli(["plan"], repo=repo)  # printed "Plan: 2 to start" and exited 0
    assert r.exit_code == 1, r.output
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, line
    assert "Plan:" not in r.stdout
    assert run_cli(["plan", "--json"], repo=repo).exit_code == 1
    applied = run_cli(["apply", "--yes"], repo=repo)  # used to start a daemon that exits 1
    assert applied.exit_code == 1 and applied.stderr.strip() == line
    assert not (repo.state / "daemon.log").exists()  # no daemon was started


@pytest.mark.parametrize("action,field,message", [
    ("{type: notify, channel: nope}", "action.channel", "unknown channel 'nope'"),
    ("{type: routine, routine: nope}", "action.routine", "unknown routine 'nope'"),
    ("{type: run, agent: nope, prompt: hi}", "action.agent", "unknown agent 'nope'"),
])
def test_plan_holds_a_monitor_naming_an_undefined_reference(
        repo: Repo, action: str, field: str, message: str) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    repo.write("monitors.d/bad.yml",
               f"source: {{type: poll, command: [echo, b], interval: 30s}}\naction: {action}\n")
    lint = run_cli(["lint"], repo=repo)
    assert lint.exit_code == 1 and "[unknown-reference]" in lint.stdout
    r = run_cli(["plan"], repo=repo)  # used to plan "+ bad will be started", exit 0
    assert r.exit_code == 1, r.output
    assert "+ alpha will be started" in r.stdout
    assert "+ bad" not in r.stdout
    [held] = [line for line in r.stdout.splitlines() if "bad: " in line]
    assert held.strip().startswith("bad: file is invalid, never applied: ")
    assert "monitors.d/bad.yml:2:" in held
    assert f"error: {field}: {message}" in held and held.endswith("[unknown-reference]")
    assert r.stdout.rstrip().endswith("1 file has errors (`monitors lint` shows them).")
    doc = json.loads(run_cli(["plan", "--json"], repo=repo).stdout)
    assert [c["name"] for c in doc["changes"]] == ["alpha"]
    [error_file] = doc["errorFiles"]
    assert error_file.endswith("monitors.d/bad.yml")


def test_a_defined_channel_is_not_an_unknown_reference(repo: Repo) -> None:
    repo.write("monitors.toml", '[channels.phone]\nurl = "json://localhost"\n')
    repo.write("monitors.d/alpha.yml",
               "source: {type: poll, command: [echo, a], interval: 30s}\n"
               "action: {type: notify, channel: phone}\n")
    r = run_cli(["plan", "--detailed-exitcode"], repo=repo)
    assert r.exit_code == 2, r.output
    assert "+ alpha will be started" in r.stdout


def test_plan_with_a_missing_user_layer_exits_1(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    repo.write("monitors.toml", '[layers]\nuser = "nope.d"\n')
    r = run_cli(["plan"], repo=repo)  # planned nothing and exited 0
    assert r.exit_code == 1, r.output
    assert "layers.user: directory nope.d does not exist [missing-layer]" in r.stdout
    assert r.stdout.rstrip().endswith("1 file has errors (`monitors lint` shows them).")


def test_each_invalid_file_is_planned_with_its_own_first_error(repo: Repo) -> None:
    """``snapshot.invalid_errors`` pairs every invalid file with its first error in one
    pass over the problems (it once re-sorted them all for each invalid file)."""
    from reconciler import settings, snapshot
    from reconciler.config import loader

    for i in range(30):
        repo.write(f"monitors.d/bad-{i:02d}.yml", f"source: {{type: poll, command: [x{i}], "
                   f"interval: {i + 1}x}}\naction: {{type: notify}}\nnope{i}: 1\n")
    repo.write("monitors.d/good.yml", MON.format(word="good"))
    result = loader.load(settings.load(root=repo.root))
    found = snapshot.invalid_errors(result)
    assert sorted(found) == [f"bad-{i:02d}" for i in range(30)]
    for i in range(30):
        assert f"bad-{i:02d}.yml:1:" in found[f"bad-{i:02d}"]  # line 1 comes before nope
        assert f"{i + 1}x" in found[f"bad-{i:02d}"]
    result.invalid["ghost"] = repo.user / "ghost.yml"
    assert snapshot.invalid_errors(result)["ghost"] == f"{repo.user / 'ghost.yml'}: invalid"
