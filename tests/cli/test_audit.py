"""The CLI's write commands go to the audit trail (``cli.auditing``) and ``monitors
audit`` shows it; read commands do not."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Repo, run_cli
from tests.factories import SECRET_HEADER_MONITOR


def test_write_commands_are_audited_with_their_outcome(repo: Repo) -> None:
    added = run_cli(["add", "head", "--poll", "git rev-parse HEAD", "30s", "--notify"],
                    repo=repo)
    assert added.exit_code == 0, added.output
    again = run_cli(["add", "head", "--poll", "echo other", "30s", "--notify"], repo=repo)
    assert again.exit_code == 1
    paused = run_cli(["pause", "head", "--reason", "quiet week"], repo=repo)
    assert paused.exit_code == 0, paused.output
    assert run_cli(["list"], repo=repo).exit_code == 0  # a read: not audited

    shown = run_cli(["audit", "--json"], repo=repo)
    assert shown.exit_code == 0, shown.output
    records = json.loads(shown.stdout)
    assert [(r["caller"], r["tool"]) for r in records] == [
        ("cli", "add"), ("cli", "add"), ("cli", "pause")]
    assert records[0]["outcome"] == "applied" and records[0]["arguments"]["name"] == "head"
    assert records[1]["outcome"].startswith("refused: a monitor named 'head' already exists")
    assert records[2]["arguments"]["reason"] == "quiet week"

    text = run_cli(["audit"], repo=repo)
    assert text.exit_code == 0 and text.stdout.count("\n") == 3
    assert "cli" in text.stdout and "refused: a monitor named" in text.stdout


def test_audit_without_records(repo: Repo) -> None:
    shown = run_cli(["audit"], repo=repo)
    assert shown.exit_code == 0 and "no audit records yet" in shown.stdout


def test_audited_arguments_have_secrets_redacted(repo: Repo,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cr3t-value-123")
    repo.write("monitors.d/hook.yml", SECRET_HEADER_MONITOR.format(word="x"))
    added = run_cli(["add", "leak", "--poll", "echo s3cr3t-value-123", "30s", "--notify"],
                    repo=repo)
    assert added.exit_code == 0, added.output
    [record] = json.loads(run_cli(["audit", "--json"], repo=repo).stdout)
    assert "s3cr3t-value-123" not in json.dumps(record)
    assert record["arguments"]["poll"] == ["echo ***", "30s"]
