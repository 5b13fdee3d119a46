"""``monitors test NAME``: dry run and replay, through the real CLI."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from reconciler.state import store as store_mod
from tests import factories
from tests.conftest import Repo, run_cli
from tests.factories import monitor

CI_RED = """
source:
  type: poll
  command: "echo 'build 7: fail at 10:00:01'"
  interval: 30s
condition:
  mode: match
  match: fail
  dedupeKey: 'build (\\d+)'
  ignore: ['\\d\\d:\\d\\d:\\d\\d']
action:
  type: run
  agent: claude
  prompt: "CI failed: {event} in build {{ signature }}."
"""


def snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


def test_dry_run_prints_and_writes_nothing(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    store = store_mod.Store(repo.state)
    store.write_state("other", {"fingerprint": "x"})
    (repo.state / "monitors" / "other" / "liveness.json").write_text("{torn")  # corrupt
    before = snapshot(repo.state)
    r = run_cli(["test", "ci-red"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "poll: echo 'build 7: fail at 10:00:01' every 30s  ·  match /fail/  ·  run claude" \
        in r.stdout
    assert "meta: {\"exitCode\":0" in r.stdout
    assert "after ignore:" in r.stdout
    assert "Would fire: yes (matched new signature)" in r.stdout
    assert "summary: fail" in r.stdout and "signature: 7" in r.stdout
    assert "would run claude" in r.stdout and "CI failed: fail in build 7." in r.stdout
    assert "no action taken, no state written" in r.stdout
    assert snapshot(repo.state) == before


def test_would_fire_judged_against_stored_state(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    r = run_cli(["test", "ci-red", "--json"], repo=repo)
    fp = json.loads(r.stdout)["fingerprint"]
    store_mod.Store(repo.state).write_state(
        "ci-red", {"fingerprint": fp, "mode": "match", "matching": True, "lastSignature": "7"})
    before = snapshot(repo.state)
    r = run_cli(["test", "ci-red"], repo=repo)
    assert "Would fire: no (unchanged)" in r.stdout
    assert "Event (what a fire would send)" in r.stdout
    data = json.loads(run_cli(["test", "ci-red", "--json"], repo=repo).stdout)
    assert data["wouldFire"] is False and data["reason"] == "unchanged"
    assert data["observation"]["afterIgnore"] == "build 7: fail at \n"
    assert data["action"]["prompt"] == "CI failed: fail in build 7."
    assert snapshot(repo.state) == before


def test_source_error_is_one_line_exit_1(repo: Repo) -> None:
    repo.write("monitors.d/slow.yml", """
        source: {type: poll, command: "sleep 5", interval: 30s, timeout: 1s}
        action: {type: notify}
    """)
    r = run_cli(["test", "slow"], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip().count("\n") == 0
    assert "slow: source check failed: timeout:" in r.stderr
    j = run_cli(["test", "slow", "--json"], repo=repo)
    assert j.exit_code == 1 and json.loads(j.stdout)["error"].startswith("timeout:")
    assert not repo.state.exists()


def test_unknown_monitor(repo: Repo) -> None:
    r = run_cli(["test", "nope"], repo=repo)
    assert r.exit_code == 1 and "no monitor named 'nope'" in r.stderr


def test_pid_dry_run_writes_no_marker(repo: Repo) -> None:
    repo.write("monitors.d/me.yml", f"""
        source: {{type: pid, pid: {os.getpid()}}}
        action: {{type: notify}}
    """)
    r = run_cli(["test", "me"], repo=repo)
    assert r.exit_code == 0 and "running" in r.stdout
    assert "Would fire: no (no match)" in r.stdout
    assert not repo.state.exists()


def test_push_source_without_a_payload_says_what_to_pass(repo: Repo) -> None:
    repo.write("monitors.d/hook.yml", """
        source: {type: webhook, provider: github, events: [push]}
        action: {type: notify}
    """)
    r = run_cli(["test", "hook"], repo=repo)
    assert r.exit_code == 1 and "--payload" in r.stderr


REPLAY = """
steps:
  - text: "build 7: fail at 10:00:01"
    fire: true
    reason: matched new signature
  - text: "build 7: fail at 10:05:00"
    fire: false
    reason: unchanged
  - error: "timeout: took too long"
    fire: false
  - text: "build 8: pass"
    reason: no match
  - text: "build 8: fail at 11:00:00"
    fire: true
"""


def test_replay_all_expectations_met(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", REPLAY)
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 0, r.output
    assert "5 steps, 2 fire(s), 0 mismatch(es)" in r.stdout
    data = json.loads(run_cli(["test", "ci-red", "--replay", str(f), "--json"],
                              repo=repo).stdout)
    assert [s["reason"] for s in data["steps"]] == [
        "matched new signature", "unchanged", "error", "no match", "matched new signature"]
    assert not repo.state.exists()


def test_replay_mismatch_exits_1(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", """
        - text: "fail"
          fire: false
        - "pass"
    """)
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 1
    assert "MISMATCH: expected fire: no, got yes" in r.stdout


def test_replay_bad_file_is_one_line(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", "steps:\n  - {text: a, error: b}\n")
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 1
    assert "steps[1]: give exactly one of text, error, payload, frame" in r.stderr


def test_ignore_end_to_end_in_engine_normalization() -> None:
    m = monitor({"type": "poll", "command": "x", "interval": 5},
                condition={"ignore": ["a+"]}, name="n")
    assert m.condition.ignore == ("a+",)


def test_replay_yaml_error_names_file_line_col(repo: Repo) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", "steps:\n  - text: a\n  - text: [b\n")
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 1
    assert f"{f}:4:1: invalid YAML:" in r.stderr
    assert "<unicode string>" not in r.stderr


@pytest.mark.parametrize("body", ["steps:\n  - text: !!int \n", "steps:\n  - !!float abc\n",
                                  "steps: " + "[" * 3000 + "\n"])
def test_replay_value_that_cannot_be_built_is_one_line(repo: Repo, body: str) -> None:
    """A core tag on a value of another type (``!!int`` with nothing after it) made the
    safe loader raise IndexError/ValueError: exit 3 with a traceback."""
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", body)
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 1, r.stderr
    assert str(f) in r.stderr and "invalid YAML" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("body", "where"), [
    ("steps:\n  - {text: a, fire: !!bool x}\n", ":2:21: invalid YAML value: !!bool 'x'"),
    ("steps:\n  - {text: a, fire: !!timestamp x}\n", ":2:21: invalid YAML value: !!timestamp"),
    ('steps:\n  - {text: !!int ""}\n', ":2:12: invalid YAML value: !!int ''"),
    ('steps:\n  - {text: "a\x1b[31m"}\n', ":2:14: invalid YAML: unacceptable character U+001B"),
])
def test_replay_value_error_is_one_line_at_the_node(repo: Repo, body: str, where: str) -> None:
    """``!!bool x`` raised KeyError, ``!!timestamp x`` AttributeError (exit 3); an empty
    ``!!int`` and a control character had no position (or a second line)."""
    repo.write("monitors.d/ci-red.yml", CI_RED)
    f = repo.write("replay.yml", body)
    r = run_cli(["test", "ci-red", "--replay", str(f)], repo=repo)
    assert r.exit_code == 1, r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert f"{f}{where}" in r.stderr


@pytest.mark.timeout(10)
def test_replay_of_an_endless_or_blocking_file_is_refused_quickly(repo: Repo,
                                                                  tmp_path: Path) -> None:
    repo.write("monitors.d/ci-red.yml", CI_RED)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for source in ("/dev/zero", str(fifo)):
        r = run_cli(["test", "ci-red", "--replay", source], repo=repo)
        assert (r.exit_code, r.stderr.strip()) == (1, f"error: {source}: not a regular file")
    big = tmp_path / "big.yml"
    big.write_bytes(b"#" * (2 << 20))
    r = run_cli(["test", "ci-red", "--replay", str(big)], repo=repo)
    assert r.exit_code == 1 and "larger than 1048576 bytes" in r.stderr


SPINNER = "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}done"


def test_cli_test_bad_url_is_one_line_exit_1(repo: Repo) -> None:
    repo.write("monitors.d/port.yml", """
        source: {type: poll-http, url: "http://127.0.0.1:99999/", interval: 30s}
        action: {type: notify}
    """)
    r = run_cli(["test", "port"], repo=repo)
    assert r.exit_code == 1, r.output
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.output
    # lint (config) or the source edge (``url:``) may refuse it: either way one line.
    assert "99999" in r.stderr and ("source check failed: url:" in r.stderr
                                    or "is invalid" in r.stderr)


def test_cli_test_freezing_template_is_a_clear_error(repo: Repo) -> None:
    repo.write("monitors.d/spin.yml", f"""
        source: {{type: poll, command: "echo x", interval: 30s}}
        condition: {{mode: every}}
        action: {{type: notify, message: "{SPINNER}"}}
    """)
    started = time.monotonic()
    r = run_cli(["test", "spin"], repo=repo)
    assert time.monotonic() - started < 60
    assert r.exit_code == 1, r.output
    assert "spin: the action would fail: template: render budget exceeded" in r.stderr
    assert "error: template: render budget exceeded" in r.stdout
    j = run_cli(["test", "spin", "--json"], repo=repo)
    assert j.exit_code == 1
    assert "render budget exceeded" in json.loads(j.stdout)["action"]["error"]


MON = factories.ECHO_MONITOR


def test_replay_errors_and_display_count_steps_from_1(repo: Repo) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    script = repo.root / "replay.yml"
    script.write_text("steps:\n  - text: a\n  - text: b\n  - text: c\n  - {fire: true}\n")
    r = run_cli(["test", "alpha", "--replay", str(script)], repo=repo)
    assert r.exit_code == 1
    assert r.stderr.strip() == (f"error: {script}: steps[4]: give exactly one of text, "
                                "error, payload, frame")
    script.write_text("steps:\n  - text: a\n  - text: b\n  - text: c\n  - text: d\n")
    shown = run_cli(["test", "alpha", "--replay", str(script)], repo=repo)
    rows = [line.split()[0] for line in shown.stdout.splitlines()[1:5]]
    assert rows == ["1", "2", "3", "4"], shown.stdout


def test_an_observed_check_error_is_shown_as_the_observation(repo: Repo) -> None:
    from tests.helpers import free_port

    repo.write("monitors.d/site.yml", f"""
        source: {{type: poll-http, url: "http://127.0.0.1:{free_port()}/", interval: 1m}}
        action: {{type: notify}}
    """)
    r = run_cli(["test", "site"], repo=repo)
    assert r.exit_code == 1
    assert "Observation\n  error: connect: GET http://127.0.0.1:" in r.stdout
    assert 'meta: {"error":"connect"}' in r.stdout
    assert "source check failed (observed as an error observation): connect: " in r.stderr
    data = json.loads(run_cli(["test", "site", "--json"], repo=repo).stdout)
    assert data["observation"]["text"].startswith("error: connect: ")
    assert data["error"].startswith("connect: ")


def test_replay_error_steps_are_observations_under_on_error_observe(repo: Repo) -> None:
    repo.write("monitors.d/site.yml", """
        source: {type: poll-http, url: "http://127.0.0.1:9/", interval: 1m}
        action: {type: notify}
    """)
    f = repo.write("replay.yml", """
        - "200\\nok"
        - {error: "connect: refused", fire: true, reason: changed}
        - {error: "connect: refused", fire: false, reason: unchanged}
        - {text: "200\\nok", fire: true, reason: changed}
    """)
    r = run_cli(["test", "site", "--replay", str(f)], repo=repo)
    assert r.exit_code == 0, r.output
    assert "4 steps, 2 fire(s), 0 mismatch(es)" in r.stdout


def test_dry_run_shows_the_selected_value(repo: Repo) -> None:
    repo.write("monitors.d/pr.yml", """
        source:
          type: poll
          command: ["printf", "%s", '{"state": "MERGED", "title": "x"}']
          interval: 1m
          select: state
        action: {type: notify}
    """)
    r = run_cli(["test", "pr"], repo=repo)
    assert r.exit_code == 0, r.output
    assert "Observation\n  MERGED\n" in r.stdout
