"""Agent and routine argv templates: which argv a ``run`` or ``routine`` action spawns.

An argv template is a list of strings; every element exactly equal to
``{prompt}`` is replaced by the whole rendered prompt as ONE argv element (no
splitting, no quoting, no shell). Text around ``{prompt}`` inside an element is
not substituted (``--msg={prompt}`` stays literal): lint reports it. A template
without a ``{prompt}`` element runs without the prompt (the prompt is still
written to the fire directory and named by ``MONITORS_PROMPT_FILE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from reconciler import errors
from reconciler.actions.options import DEFAULT_RUN_TIMEOUT, PROMPT, ActionsConfig, CommandSpec

if TYPE_CHECKING:
    from reconciler.actions.run import RunSpec


def substitute(template: Sequence[str], prompt: str) -> list[str]:
    """Return ``template`` with each element exactly ``{prompt}`` replaced by ``prompt``."""
    return [prompt if part == PROMPT else part for part in template]


def check(template: Sequence[str]) -> str | None:
    """Return what is wrong with an argv template for lint, or None."""
    if not template:
        return "argv is empty"
    for part in template:
        if PROMPT in part and part != PROMPT:
            return f"argv element {part!r}: {PROMPT} must be a whole element to be replaced"
    return None


def for_run(action: RunSpec, config: ActionsConfig) -> CommandSpec:
    """Return the command a ``run`` action spawns (its own options folded in).

    ``command`` wins over ``agent``; ``cwd`` (else the agent's), ``env`` (over the
    agent's), ``timeout`` and ``overlap`` come from the action.

    Raises:
        errors.NotFoundError: an unknown agent.
        errors.ActionError: neither ``agent`` nor ``command``.
    """
    if action.command:
        base = CommandSpec(name="command", argv=tuple(str(a) for a in action.command))
    elif action.agent:
        found = config.agents.get(action.agent)
        if found is None:
            known = ", ".join(sorted(config.agents))
            raise errors.NotFoundError(
                f"unknown agent {action.agent!r} (known: {known}; see [agents])")
        base = found
    else:
        raise errors.ActionError("run action names neither an agent nor a command")
    return CommandSpec(
        name=base.name,
        argv=base.argv,
        cwd=action.cwd or base.cwd,
        env={**base.env, **action.env},
        timeout=action.timeout or base.timeout or DEFAULT_RUN_TIMEOUT,
        overlap=action.overlap or base.overlap or "skip",
    )
