"""The audit trail of the CLI's write commands (``add``, ``remove``, ``edit``, ``pause``,
``resume``, ``pin``, ``unpin``, ``apply``, ``stop``): each invocation is appended to
``<state>/audit.jsonl`` (``state.audit``) with caller ``cli``, its parameters (secrets
redacted) and its outcome. Outside a repository (no settings) nothing is recorded.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import click

from reconciler import errors

AUDITED = frozenset({"add", "remove", "edit", "pause", "resume", "pin", "unpin", "apply",
                     "stop"})
"""The commands that change files or what runs (the MCP tools are audited in
``mcpserver.server``)."""


def outcome(exc: BaseException | None, rv: Any) -> str:
    """``applied`` (exit 0), ``refused: <reason>`` (a usage, not-found or config error),
    ``error: <line>`` (any other error, or a non-zero exit)."""
    if exc is None:
        code = int(rv) if isinstance(rv, int) else 0
        return "applied" if code == 0 else f"error: exit {code}"
    if isinstance(exc, errors.UsageError | errors.NotFoundError | errors.ConfigError):
        return f"refused: {' '.join(str(exc).split())}"
    if isinstance(exc, click.exceptions.Exit) and not exc.exit_code:
        return "applied"
    return f"error: {' '.join(str(exc).split()) or type(exc).__name__}"


def _record(ctx: click.Context, name: str, result: str) -> None:
    from reconciler.mcpserver.operations import redactor
    from reconciler.state import audit

    with contextlib.suppress(errors.MonitorsError, OSError):
        cfg = ctx.find_root().obj.settings()
        audit.append(cfg.state_dir, audit.entry(
            caller="cli", tool=name, arguments=dict(ctx.params), outcome=result,
            redactor=redactor(cfg)))


def install(command: click.Command, name: str) -> click.Command:
    """``command`` with its callback audited when ``name`` is in ``AUDITED``."""
    callback = command.callback
    if name not in AUDITED or callback is None or getattr(callback, "_audited", False):
        return command

    @functools.wraps(callback)
    def audited(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        try:
            rv = callback(*args, **kwargs)
        except BaseException as e:
            _record(ctx, name, outcome(e, None))
            raise
        _record(ctx, name, outcome(None, rv))
        return rv

    audited._audited = True  # type: ignore[attr-defined]
    command.callback = audited
    return command
