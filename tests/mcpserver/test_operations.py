"""The tools' cores without the SDK (``mcpserver.operations``, ``mcpserver.server.call``):
the refusals that need a state a real daemon reaches only by timing, and the audit's
redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import errors, settings
from reconciler.client import stopper
from reconciler.config import generation
from reconciler.events import Event
from reconciler.mcpserver import operations, server
from reconciler.model import MonitorName
from reconciler.state import audit
from reconciler.state import store as store_mod
from tests.conftest import Repo
from tests.factories import SECRET_HEADER_MONITOR, monitor_yaml


def _settings(repo: Repo) -> settings.Settings:
    return settings.load(root=repo.root, state_dir=repo.state, device="test-box")


def _update_args(path: Path, command: str) -> dict[str, object]:
    return {"name": "head", "generation": generation.of_file(path), "wait": 0,
            "source": {"type": "poll", "command": ["sh", "-c", command], "interval": "1s"},
            "action": {"type": "notify"}}


def test_update_is_refused_while_an_action_is_in_flight(repo: Repo) -> None:
    path = repo.write("monitors.d/head.yml", monitor_yaml("head", "echo one"))
    before = path.read_bytes()
    store = store_mod.Store(repo.state)
    store.create_fire("head", Event(
        id="20260101T000000.000000-aaaaaaaa", monitor=MonitorName("head"),
        fingerprint="sha256:x", fired_at="2026-01-01T00:00:00.000000Z",  # type: ignore[arg-type]
        summary="s", signature="s", observation="o", reason="changed"), status="dispatched")
    with pytest.raises(errors.UsageError, match=r"action in flight.*20260101T000000"):
        operations.update(_settings(repo), _update_args(path, "echo two"), by="mcp:t")
    assert path.read_bytes() == before


def test_a_stale_generation_is_a_conflict_naming_the_current_one(repo: Repo) -> None:
    path = repo.write("monitors.d/head.yml", monitor_yaml("head", "echo one"))
    args = _update_args(path, "echo two")
    path.write_text(path.read_text() + "# edited by a person\n")
    before = path.read_bytes()
    with pytest.raises(operations.Conflict) as caught:
        operations.update(_settings(repo), args, by="mcp:t")
    assert caught.value.current == generation.of_bytes(before)
    assert str(caught.value.current) in str(caught.value)
    assert path.read_bytes() == before


def test_audit_redacts_the_secrets_the_configuration_references(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cr3t-value-123")
    repo.write("monitors.d/hook.yml", SECRET_HEADER_MONITOR.format(word="x"))
    result, error = server.call(_settings(repo), "monitor_inspect",
                                {"name": "nope", "note": "Bearer s3cr3t-value-123"},
                                client="t")
    assert result is None and error is not None
    [record] = audit.read(repo.state)
    assert "s3cr3t-value-123" not in str(record) and "***" in str(record["arguments"])


def test_tool_answers_redact_the_secrets_the_configuration_references(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit had ``***`` but ``monitor_test`` answered the secret in its summary line
    (and ``monitor_stop`` echoed it in its reason)."""
    monkeypatch.setenv("HOOK_TOKEN", "s3cr3t-value-123")
    repo.write("monitors.d/hook.yml", SECRET_HEADER_MONITOR.format(word="s3cr3t-value-123"))
    result, error = server.call(_settings(repo), "monitor_test", {"name": "hook"}, client="t")
    assert error is None and result is not None
    assert "s3cr3t-value-123" not in str(result) and "***" in str(result["summary"])
    result, error = server.call(_settings(repo), "monitor_inspect",
                                {"name": "ghost s3cr3t-value-123"}, client="t")
    assert result is None and error is not None and "s3cr3t-value-123" not in error


def test_a_stop_reason_is_redacted_before_it_reaches_the_state(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """``stopped.json`` kept an agent's reason as given, a referenced secret included."""
    monkeypatch.setenv("HOOK_TOKEN", "s3cr3t-value-456")
    repo.write("monitors.d/hook.yml", SECRET_HEADER_MONITOR.format(word="hi"))
    settings = _settings(repo)
    try:
        operations.stop(settings, {"name": "hook", "reason": "token s3cr3t-value-456 leaked"},
                        by="mcp")
    finally:  # the tool's apply started a daemon
        stopper.stop(settings.state_dir)
    stored = (settings.state_dir / "monitors" / "hook" / "stopped.json").read_text()
    assert "s3cr3t-value-456" not in stored and "***" in stored
