"""``monitors test`` for push sources: ``--payload FILE [--event E]`` (webhook),
``--frame TEXT`` (ws) and ``--replay`` steps with pushed observations; nothing acted,
nothing written."""

from __future__ import annotations

import json

from tests.conftest import Repo, run_cli

HOOK = """
    source:
      type: webhook
      provider: github
      events: [pull_request.closed]
      select: pull_request.title
    condition: {mode: every}
    action: {type: notify}
"""
FRAMES = """
    source: {type: ws, url: "ws://127.0.0.1:9/", select: status}
    condition: {mode: match, match: red}
    action: {type: notify}
"""


def test_payload_is_evaluated_with_select(repo: Repo) -> None:
    repo.write("monitors.d/hook.yml", HOOK)
    payload = repo.root / "pr.json"
    payload.write_text(json.dumps({"action": "closed", "pull_request": {"title": "Fix it"}}))
    r = run_cli(["test", "hook", "--payload", str(payload), "--event", "pull_request",
                 "--json"], repo=repo)
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["observation"]["text"] == "Fix it"
    assert data["observation"]["meta"]["event"] == "pull_request"
    assert data["observation"]["meta"]["action"] == "closed"
    assert data["wouldFire"] is True
    assert not repo.state.exists()


def test_frame_is_evaluated_and_the_wrong_option_is_refused(repo: Repo) -> None:
    repo.write("monitors.d/frames.yml", FRAMES)
    r = run_cli(["test", "frames", "--frame", '{"status": "red"}'], repo=repo)
    assert r.exit_code == 0, r.stderr
    assert "Would fire: yes" in r.stdout and "red" in r.stdout
    wrong = run_cli(["test", "frames", "--payload", "x.json"], repo=repo)
    assert wrong.exit_code != 0 and "use --frame" in wrong.stderr
    bad = run_cli(["test", "frames", "--frame", "not json"], repo=repo)
    assert bad.exit_code == 1 and "select" in bad.stderr
    assert not repo.state.exists()


def test_replay_accepts_payload_and_frame_steps(repo: Repo) -> None:
    repo.write("monitors.d/hook.yml", HOOK)
    repo.write("monitors.d/frames.yml", FRAMES)
    (repo.root / "hook-steps.yml").write_text(
        "steps:\n"
        "  - payload: {action: closed, pull_request: {title: A}}\n"
        "    event: pull_request\n"
        "    fire: true\n")
    r = run_cli(["test", "hook", "--replay", str(repo.root / "hook-steps.yml"), "--json"],
                repo=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["fires"] == 1
    (repo.root / "frame-steps.yml").write_text(
        "steps:\n"
        "  - frame: '{\"status\": \"green\"}'\n"
        "    fire: false\n"
        "  - frame: '{\"status\": \"red\"}'\n"
        "    fire: true\n")
    r = run_cli(["test", "frames", "--replay", str(repo.root / "frame-steps.yml")], repo=repo)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "2 steps, 1 fire(s), 0 mismatch(es)" in r.stdout
    assert not repo.state.exists()


def test_payload_of_an_event_the_monitor_does_not_take_is_refused(repo: Repo) -> None:
    """The receiver never hands an ``issues`` delivery, or a ``pull_request`` one whose
    action is ``opened``, to ``events: [pull_request.closed]``: the dry run must not say
    it would fire."""
    repo.write("monitors.d/hook.yml", HOOK)
    payload = repo.root / "pr.json"
    payload.write_text(json.dumps({"action": "opened", "pull_request": {"title": "Fix it"}}))
    for extra in (["--event", "pull_request"], ["--event", "issues"]):
        r = run_cli(["test", "hook", "--payload", str(payload), *extra], repo=repo)
        assert r.exit_code == 1, r.stdout
        assert "hook takes pull_request.closed" in r.stderr, r.stderr
        assert "Would fire" not in r.stdout and "Traceback" not in r.stderr
    assert not repo.state.exists()
