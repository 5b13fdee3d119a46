"""Repository-level lint checks and URL / push-source checks (newcomer findings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import Repo, run_cli

NOTIFY = "action: {type: notify}\n"


def lint_json(repo: Repo) -> tuple[int, list[dict[str, object]]]:
    r = run_cli(["lint", "--format", "json"], repo=repo)
    return r.exit_code, json.loads(r.stdout)


def test_ignored_entries_are_warned_not_skipped_in_silence(repo: Repo) -> None:
    repo.write("monitors.d/ok.yml", "source: {type: file, path: x}\n" + NOTIFY)
    repo.write("monitors.d/sub/x.yml", "source: {type: file, path: y}\n" + NOTIFY)
    (repo.user / "dir.yml").mkdir()
    os.symlink(repo.root / "nowhere.yml", repo.user / "dangling.yml")
    code, problems = lint_json(repo)
    got = {(str(p["file"]).split("monitors.d/")[-1], p["rule"]) for p in problems}
    assert ("sub", "ignored-path") in got
    assert ("dir.yml", "ignored-path") in got
    assert ("dangling.yml", "ignored-path") in got
    assert code == 0  # warnings only
    assert not any(str(p["file"]).endswith("overlays") for p in problems)


def test_bad_urls_are_lint_errors_with_position(repo: Repo) -> None:
    repo.write("monitors.d/port.yml",
               "source: {type: poll-http, url: 'http://127.0.0.1:99999/', interval: 5s}\n"
               + NOTIFY)
    repo.write("monitors.d/v6.yml", "source:\n  type: poll-http\n  url: 'http://[::1'\n"
               "  interval: 5s\n" + NOTIFY)
    code, problems = lint_json(repo)
    bad = sorted((str(p["file"]).rsplit("/", 1)[-1], p["line"], p["field"])
                 for p in problems if p["rule"] == "bad-url")
    assert bad == [("port.yml", 1, "source.url"), ("v6.yml", 3, "source.url")]
    assert code == 1


def test_push_sources_lint_clean(repo: Repo) -> None:
    repo.write("monitors.d/hook.yml",
               "source: {type: webhook, provider: github, events: [push]}\n" + NOTIFY)
    repo.write("monitors.d/frames.yml", "source: {type: ws, url: 'ws://127.0.0.1:9/'}\n"
               + NOTIFY)
    code, problems = lint_json(repo)
    assert problems == []
    assert code == 0


def test_push_source_select_is_compiled(repo: Repo) -> None:
    repo.write("monitors.d/hook.yml", "source: {type: webhook, provider: github, "
               "events: [push], select: 'a[?'}\n" + NOTIFY)
    _, problems = lint_json(repo)
    assert [p["rule"] for p in problems] == ["bad-select"]


def test_device_source_not_in_fleet_warns(repo: Repo) -> None:
    repo.write("monitors.d/box.yml", "source: {type: device, device: nodev}\n" + NOTIFY)
    _, problems = lint_json(repo)
    assert [(p["rule"], p["field"]) for p in problems] == [("unknown-device", "source.device")]
    repo.write("fleet.yaml", "devices:\n  - {name: nodev, address: '127.0.0.1:1'}\n")
    _, problems = lint_json(repo)
    assert problems == []


def test_owner_pin_not_in_fleet_warns(repo: Repo) -> None:
    repo.write("fleet.yaml", "devices:\n  - {name: a}\n")
    repo.write("monitors.d/pinned.yml",
               "source: {type: file, path: x}\n" + NOTIFY + "device: typo-box\n")
    _, problems = lint_json(repo)
    assert [(p["rule"], p["line"], p["field"], p["message"]) for p in problems] == [
        ("unknown-device", 3, "device",
         "device 'typo-box' is not in the fleet file: nothing will evaluate this monitor")]


def test_allowlist_names_the_missing_device_at_its_item(repo: Repo) -> None:
    repo.write("fleet.yaml", "devices:\n  - {name: laptop}\n")
    repo.write("monitors.d/pinned.yml", "source: {type: file, path: x}\n" + NOTIFY
               + "devices:\n  - laptop\n  - ghost\n")
    _, problems = lint_json(repo)
    assert [(p["line"], p["field"], p["message"]) for p in problems] == [
        (5, "devices.1",
         "device 'ghost' is not in the fleet file; that device never evaluates this monitor")]


def test_overlay_pin_to_unknown_device_is_reported_on_the_overlay(repo: Repo) -> None:
    repo.write("fleet.yaml", "devices:\n  - {name: laptop}\n")
    repo.write("monitors.d/m.yml", "source: {type: file, path: x}\n" + NOTIFY)
    repo.write("monitors.d/overlays/m.yml", "monitor: m\npin:\n  device: ghost\n")
    _, problems = lint_json(repo)
    assert [(str(p["file"]).endswith("overlays/m.yml"), p["line"], p["field"])
            for p in problems] == [(True, 3, "pin.device")]


def test_yaml11_hint_inside_a_command_list(repo: Repo) -> None:
    repo.write("monitors.d/y.yml", "source:\n  type: poll\n  command: [yes]\n"
               "  interval: 5s\n" + NOTIFY)
    code, problems = lint_json(repo)
    assert code == 1
    msgs = [str(p["message"]) for p in problems if p["field"] == "source.command"]
    assert any("quote" in m for m in msgs), msgs


def test_pin_elsewhere_without_a_fleet_file_warns(repo: Repo) -> None:
    repo.write("monitors.d/m.yml", "source: {type: file, path: x}\n" + NOTIFY)
    repo.write("monitors.d/overlays/m.yml", "monitor: m\npin:\n  device: other\n")
    _, problems = lint_json(repo)
    assert [(str(p["file"]).endswith("overlays/m.yml"), p["line"], p["rule"])
            for p in problems] == [(True, 3, "unknown-device")]
    assert "there is no fleet file" in str(problems[0]["message"])
    repo.write("monitors.d/overlays/m.yml", "monitor: m\npin:\n  device: test-box\n")
    assert lint_json(repo)[1] == []


def test_record_file_name_matches_the_pull_module() -> None:
    from reconciler.config import repochecks, systemrecord

    assert systemrecord.RECORD_FILE == ".upstream.json"
    source = Path(repochecks.__file__).read_text(encoding="utf-8")
    assert '".upstream.json"' in source


def test_odd_layer_entries_are_one_problem_each_and_the_rest_loads(repo: Repo) -> None:
    """A symlink loop, a name that is not UTF-8, a symlink to a device: each is its own
    problem (no exit 3), and the layer's other files still load (none silently dropped)."""
    repo.write("monitors.d/ok.yml", "source: {type: file, path: x}\n" + NOTIFY)
    os.symlink("loop.yml", repo.user / "loop.yml")
    os.symlink("/dev/zero", repo.user / "zero.yml")
    (repo.user / os.fsdecode(b"\xff.yml")).write_bytes(b"x")
    (repo.overlays / os.fsdecode(b"\xfe.yml")).write_bytes(b"x")
    os.symlink("loop.yml", repo.system / "loop.yml")
    code, problems = lint_json(repo)
    got = {(str(p["file"]).split("/")[-1], p["rule"]) for p in problems}
    assert got == {("loop.yml", "unreadable"), ("zero.yml", "ignored-path"),
                   ("\\xff.yml", "bad-filename"), ("\\xfe.yml", "bad-filename")}
    assert code == 1
    zero = next(p for p in problems if str(p["file"]).endswith("zero.yml"))
    assert "character device" in str(zero["message"])
    for args in (["plan"], ["list"], ["layers"]):
        r = run_cli(args, repo=repo)
        assert r.exit_code in (0, 1), r.output
    plan = run_cli(["plan"], repo=repo).output
    assert "ok" in plan and "1 to start" in plan
    assert "system/loop.yml" in run_cli(["layers"], repo=repo).output


def test_a_repository_path_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / os.fsdecode(b"\xferepo")
    (root / "monitors.d").mkdir(parents=True)
    r = run_cli(["--root", str(root), "plan"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [
        f"error: {tmp_path}/\\xferepo: the repository path is not valid UTF-8; rename or "
        f"move the repository"]


def test_owners_without_etcd_is_an_error_at_the_owners_list(repo: Repo) -> None:
    repo.write("monitors.d/shared.yml", "source: {type: file, path: x}\n" + NOTIFY
               + "owners: [a, b]\n")
    code, problems = lint_json(repo)
    assert [(p["rule"], p["severity"], p["line"], p["field"]) for p in problems] == [
        ("owners-without-etcd", "error", 3, "owners")]
    assert code == 1
    repo.write("monitors.toml", "[etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n")
    assert lint_json(repo) == (0, [])


def test_owners_with_a_stream_source_is_an_error_at_its_type(repo: Repo) -> None:
    repo.write("monitors.toml", "[etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\n")
    repo.write("monitors.d/tail.yml", "source:\n  type: command\n  command: [echo, hi]\n"
               + NOTIFY + "owners: [a, b]\n")
    code, problems = lint_json(repo)
    assert [(p["rule"], p["line"], p["field"]) for p in problems] == [
        ("owners-unpolled", 2, "source.type")]
    assert code == 1
