"""Regression tests for plan/apply/CLI findings that need no daemon.

Each test feeds the input that used to pass (or to print a raw message) through
the real CLI on a temp repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.client import control as client
from reconciler.conditions.spec import Condition
from reconciler.daemon import protocol
from reconciler.model import Fingerprint, Monitor, MonitorName, RateLimit, Scope
from reconciler.planning import diff
from reconciler.settings import Settings
from reconciler.sources.poll import PollSpec
from tests.conftest import Repo, run_cli

MON = """\
source:
  type: poll
  command: [echo, {word}]
  interval: 30s
action:
  type: notify
"""

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


def test_apply_names_a_garbage_plan_file(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    bad = repo.root / "p3.json"
    bad.write_text("garbage\n")
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"error: {bad} is not a plan file saved by `monitors plan "
                                "--out` (invalid JSON at line 1 column 1)")
    bad.write_text('{"format": "monitors-plan", "version": 1,\n  "digest": }')
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert "(invalid JSON at line 2 column 13)" in r.stderr
    bad.write_bytes(b"\xff\xfe")
    r = run_cli(["apply", "--yes", str(bad)], repo=repo)
    assert r.stderr.strip().endswith("is not a plan file saved by `monitors plan --out` "
                                     "(not UTF-8 text)")
    assert not (repo.state / "daemon.log").exists()


def test_a_saved_plan_is_stale_when_monitors_toml_changed(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    saved = repo.root / "p.json"
    assert run_cli(["plan", "--out", str(saved)], repo=repo).exit_code == 0
    assert json.loads(saved.read_text())["settingsDigest"].startswith("sha256:")
    repo.write("monitors.toml", '[channels.phone]\nurl = "json://localhost"\n')
    r = run_cli(["apply", "--yes", str(saved)], repo=repo)
    assert r.exit_code == 1
    assert "saved plan is stale: monitors.toml changed since the plan was made" in r.stderr
    assert not (repo.state / "daemon.log").exists()


@pytest.mark.parametrize("command", ["runs", "logs"])
@pytest.mark.parametrize("limit", ["0", "-3"])
def test_limit_below_1_is_a_usage_error(repo: Repo, command: str, limit: str) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    r = run_cli([command, "alpha", "--limit", limit], repo=repo)  # said "no fires yet"
    assert r.exit_code == 1
    assert "no fires yet" not in r.stdout
    assert "--limit" in r.stderr and "x>=1" in r.stderr
    assert run_cli([command, "alpha", "--limit", "1"], repo=repo).exit_code == 0


def test_replay_errors_and_display_count_steps_from_1(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    script = repo.root / "replay.yml"
    script.write_text("steps:\n  - text: a\n  - text: b\n  - text: c\n  - {fire: true}\n")
    r = run_cli(["test", "alpha", "--replay", str(script)], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip() == f"error: {script}: steps[4]: give exactly one of text or error"
    script.write_text("steps:\n  - text: a\n  - text: b\n  - text: c\n  - text: d\n")
    shown = run_cli(["test", "alpha", "--replay", str(script)], repo=repo)
    rows = [line.split()[0] for line in shown.stdout.splitlines()[1:5]]
    assert rows == ["1", "2", "3", "4"], shown.stdout


def _monitor(rate: RateLimit | None, labels: dict[str, str]) -> Monitor:
    source = PollSpec(command="true", interval=30.0, timeout=30.0)
    return Monitor(name=MonitorName("repo-head"), source=source, condition=Condition(),
                   action={"type": "notify"}, fingerprint=Fingerprint("sha256:x"),
                   scope=Scope.USER, origin=Path("monitors.d/repo-head.yml"), line=1,
                   rate_limit=rate, labels=labels)


def test_update_reason_names_each_changed_field_once() -> None:
    old = _monitor(RateLimit(5, 60.0), {"a": "1"})
    new = _monitor(RateLimit(9, 120.0), {"a": "2"})
    [change] = diff.diff({old.name: new}, {old.name: old})
    assert change.action is diff.ChangeKind.UPDATE
    # was "labels, rateLimit, rateLimit changed": rateLimit.max and rateLimit.per
    assert change.reason == "labels, rateLimit changed: updated in place, baseline kept"
    assert [f.path for f in change.fields] == ["labels.a", "rateLimit.max", "rateLimit.per"]


def _cfg(tmp_path: Path, *, device: str = "vm", toml: dict[str, object] | None = None
         ) -> Settings:
    return Settings(root=tmp_path, user_dir=tmp_path / "monitors.d",
                    system_dir=tmp_path / "system", overlays_dir=tmp_path / "o",
                    state_dir=tmp_path / ".history", fleet_file=tmp_path / "fleet.yaml",
                    device=device, toml=toml or {})


def test_settings_mismatch_names_what_differs(tmp_path: Path) -> None:
    started = _cfg(tmp_path, toml={"device": "vm"})
    status = {"ok": True, "pid": 42, "device": "vm", "root": str(tmp_path),
              "settingsDigest": protocol.settings_digest(started)}
    assert client.settings_mismatch(started, status) is None
    assert client.settings_mismatch(started, None) is None
    edited = _cfg(tmp_path, device="otherbox", toml={"device": "otherbox"})
    assert client.settings_mismatch(edited, status) == (
        "the daemon runs with other settings (device vm; monitors.toml changed since it "
        "started): restart it (`monitors stop`, then `monitors apply`) to use them (daemon pid 42)")
    layers = _cfg(tmp_path, toml={"device": "vm", "layers": {"user": "nope.d"}})
    assert "(monitors.toml changed since it started)" in str(
        client.settings_mismatch(layers, status))
    # an older daemon without settingsDigest: device and root still compared
    assert client.settings_mismatch(edited, {"device": "vm", "root": str(tmp_path)}) == (
        "the daemon runs with other settings (device vm): restart it (`monitors stop`, then "
        "`monitors apply`) to use them")
    other_root = {**status, "root": str(tmp_path / "elsewhere")}
    assert f"root {tmp_path / 'elsewhere'}" in str(client.settings_mismatch(started, other_root))


def test_settings_digest_ignores_key_order_and_sees_values(tmp_path: Path) -> None:
    a = _cfg(tmp_path, toml={"device": "vm", "daemon": {"resync": "60s"}})
    b = _cfg(tmp_path, toml={"daemon": {"resync": "60s"}, "device": "vm"})
    c = _cfg(tmp_path, toml={"daemon": {"resync": "61s"}, "device": "vm"})
    assert protocol.settings_digest(a) == protocol.settings_digest(b) != protocol.settings_digest(c)
