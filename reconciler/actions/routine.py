"""The ``routine`` action: fire a named command from ``[routines.NAME]`` in monitors.toml.

Same machinery as ``run`` (``run.execute``: no shell, its own process group,
timeout, capped output beside the fire record, overlap); the routine's argv
template, ``cwd``, ``env``, ``timeout`` and ``overlap`` come from monitors.toml,
and the action's ``prompt`` (default ``{{ event }}``) fills ``{prompt}`` elements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler import errors
from reconciler.actions import options
from reconciler.actions.options import ActionsConfig, CommandSpec

DEFAULT_PROMPT = "{{ event }}"


def resolve(action: Mapping[str, Any], config: ActionsConfig) -> CommandSpec:
    """Return the command a normalized ``routine`` action spawns.

    Raises:
        errors.NotFoundError: the routine is not in ``[routines]``.
    """
    name = str(action.get("routine"))
    found = config.routines.get(name)
    if found is None:
        known = ", ".join(sorted(config.routines)) or "none defined"
        raise errors.NotFoundError(f"unknown routine {name!r} (known: {known}; see [routines])")
    return CommandSpec(
        name=found.name,
        argv=found.argv,
        cwd=found.cwd,
        env=found.env,
        timeout=found.timeout or options.DEFAULT_RUN_TIMEOUT,
        overlap=found.overlap or "skip",
    )


def prompt(action: Mapping[str, Any]) -> str:
    """The routine's prompt template."""
    return str(action.get("prompt") or DEFAULT_PROMPT)
