"""The ``run`` action type: spawn an agent (``[agents]``) or a command with the prompt.

All that is known about ``run`` (README: Actions): its spec and defaults (``RunSpec``),
normalization for the fingerprint (``normalize``/``to_json``), its one-line
description, its lint checks, its ``test`` preview, its crash recovery
(at-most-once: never re-spawned) and ``fire``. The process machinery is
``actions.spawn`` and the overlap queue ``actions.jobs``, imported when a fire
happens: this module imports only leaves, so ``monitors lint`` can use it without
asyncio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.actions import agents, options
from reconciler.actions.common import Recovery, mapping, seconds
from reconciler.actions.options import ActionsConfig
from reconciler.addflags import AddFlag

if TYPE_CHECKING:
    from reconciler.actions.dispatch import Dispatcher
    from reconciler.events import Event
    from reconciler.model import Monitor

TYPE = "run"
RECOVERY = Recovery.INTERRUPT
TEMPLATES: tuple[str, ...] = ("prompt",)
FIELDS: tuple[str, ...] = ("agent", "command", "prompt", "cwd", "env", "timeout", "overlap")
DURATIONS: tuple[str, ...] = ("timeout",)  # fields holding durations (seconds)
DEFAULT_OVERLAP = "skip"
ADD = AddFlag("--run", "AGENT", "Run AGENT with --prompt (the event is {event}).",
              takes_prompt=True)


@dataclass(frozen=True, slots=True)
class RunSpec:
    """A normalized ``run`` action.

    Attributes:
        prompt: the Jinja2 prompt template (required).
        agent: an ``[agents]`` name, or None when ``command`` is given.
        command: an argv template (``{prompt}`` elements take the prompt); wins over agent.
        cwd: working directory (None: the agent's, else the repository root).
        env: extra environment (values may reference ``${ENV}``).
        timeout: seconds before the process group is killed.
        overlap: skip | queue | parallel, when a fire comes while a run is going.
    """

    prompt: str
    agent: str | None = None
    command: tuple[str, ...] | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float = options.DEFAULT_RUN_TIMEOUT
    overlap: str = DEFAULT_OVERLAP
    type: str = TYPE

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping the fingerprint hashes (``to_json`` below)."""
        return to_json(self)

    def describe(self) -> str:
        """The one line list/view/plan/test show (``describe`` below)."""
        return describe(self)


def normalize(raw: Mapping[str, Any]) -> RunSpec:
    """The spec of a schema-valid ``run`` mapping (or of its ``to_json``).

    Raises:
        ValueError: a duration does not parse.
    """
    return RunSpec(
        agent=raw.get("agent"),
        command=tuple(raw["command"]) if raw.get("command") else None,
        prompt=raw["prompt"],
        cwd=raw.get("cwd"),
        env=mapping(raw.get("env")),
        timeout=seconds(raw.get("timeout"), options.DEFAULT_RUN_TIMEOUT),
        overlap=raw.get("overlap", DEFAULT_OVERLAP),
    )


def to_json(spec: RunSpec) -> dict[str, Any]:
    """The normalized mapping the fingerprint hashes (keys and order as ever)."""
    return {
        "type": TYPE,
        "agent": spec.agent,
        "command": list(spec.command) if spec.command else None,
        "prompt": spec.prompt,
        "cwd": spec.cwd,
        "env": dict(spec.env),
        "timeout": spec.timeout,
        "overlap": spec.overlap,
    }


def who(spec: RunSpec) -> str:
    """The agent's name, else the command joined by spaces."""
    return spec.agent or " ".join(spec.command or ())


def describe(spec: RunSpec) -> str:
    """``run claude`` or ``run make test``."""
    return f"{TYPE} {who(spec)}".strip()


def preview(spec: RunSpec) -> str:
    """What ``monitors test`` says the action would do."""
    return f"would run {who(spec)} with the prompt below"


def check(action: Mapping[str, Any], config: ActionsConfig | None) -> list[tuple[str, str]]:
    """A run needs an agent or a command; a command's argv template must be usable
    (``agents.check``); a named agent must be defined in ``config`` (None: not looked up).

    Returns:
        ``(dotted field, message)`` pairs, e.g. ``("action.agent", "unknown agent ...")``.
    """
    command, agent = action.get("command"), action.get("agent")
    if command:
        problem = agents.check([str(c) for c in command])
        return [("action.command", problem)] if problem else []
    if not agent:
        return [("action", "run needs an agent (see [agents]) or a command")]
    if config is not None and str(agent) not in config.agents:
        known = ", ".join(sorted(config.agents))
        return [("action.agent", f"unknown agent {agent!r} (known: {known})")]
    return []


def from_flag(value: str, prompt: str | None) -> dict[str, Any]:
    """The action ``monitors add --run AGENT --prompt TEXT`` writes.

    Raises:
        errors.UsageError: no agent named, or no ``--prompt``.
    """
    if not value:
        raise errors.UsageError("--run: name an agent (configured in monitors.toml [agents])")
    if prompt is None:
        raise errors.UsageError("--run needs --prompt TEXT (the event is {event})")
    return {"type": TYPE, "agent": value, "prompt": prompt}


async def fire(d: Dispatcher, monitor: Monitor, event: Event, spec: RunSpec, *,
               recovered: bool) -> None:
    """Resolve the command, render the prompt and hand the run to the overlap queue.

    Raises:
        errors.MonitorsError: an unknown agent or a template that does not render
            (the dispatcher records a ``failed`` fire).
    """
    from reconciler.actions import templating

    command = agents.for_run(spec, d.config)
    prompt = await d.render(spec.prompt, templating.context(monitor, event))
    await d.runs.admit(monitor, event, kind=TYPE, spec=command, prompt=prompt)
