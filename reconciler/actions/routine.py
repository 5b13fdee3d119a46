"""The ``routine`` action type: fire a named command from ``[routines.NAME]`` in monitors.toml.

Same machinery as ``run`` (``actions.spawn``: no shell, its own process group,
timeout, capped output beside the fire record; ``actions.jobs``: overlap); the
routine's argv template, ``cwd``, ``env``, ``timeout`` and ``overlap`` come from
monitors.toml, and the action's ``prompt`` (default ``{{ event }}``) fills
``{prompt}`` elements. Crash recovery: at-most-once (never re-spawned). Imports
only leaves (see ``actions.run``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler import errors
from reconciler.actions import options
from reconciler.actions.common import Recovery
from reconciler.actions.options import ActionsConfig, CommandSpec
from reconciler.addflags import AddFlag

if TYPE_CHECKING:
    from reconciler.actions.dispatch import Dispatcher
    from reconciler.events import Event
    from reconciler.model import Monitor

TYPE = "routine"
RECOVERY = Recovery.INTERRUPT
TEMPLATES: tuple[str, ...] = ("prompt",)
FIELDS: tuple[str, ...] = ("routine", "prompt")
DURATIONS: tuple[str, ...] = ()  # fields holding durations (seconds)
DEFAULT_PROMPT = "{{ event }}"
ADD = AddFlag("--routine", "NAME", "Fire a routine from monitors.toml.", takes_prompt=True)


@dataclass(frozen=True, slots=True)
class RoutineSpec:
    """A normalized ``routine`` action.

    Attributes:
        routine: the ``[routines]`` name.
        prompt: the Jinja2 template filling ``{prompt}`` argv elements.
    """

    routine: str
    prompt: str = DEFAULT_PROMPT
    type: str = TYPE

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping the fingerprint hashes (``to_json`` below)."""
        return to_json(self)

    def describe(self) -> str:
        """The one line list/view/plan/test show (``describe`` below)."""
        return describe(self)


def normalize(raw: Mapping[str, Any]) -> RoutineSpec:
    """The spec of a schema-valid ``routine`` mapping (or of its ``to_json``)."""
    return RoutineSpec(routine=raw["routine"], prompt=raw.get("prompt", DEFAULT_PROMPT))


def to_json(spec: RoutineSpec) -> dict[str, Any]:
    """The normalized mapping the fingerprint hashes."""
    return {"type": TYPE, "routine": spec.routine, "prompt": spec.prompt}


def describe(spec: RoutineSpec) -> str:
    """``routine deploy``."""
    return f"{TYPE} {spec.routine}"


def preview(spec: RoutineSpec) -> str:
    """What ``monitors test`` says the action would do."""
    return f"would fire routine {spec.routine}"


def check(action: Mapping[str, Any], config: ActionsConfig | None) -> list[tuple[str, str]]:
    """The named routine must be defined in ``config`` (None: not looked up)."""
    if config is None:
        return []
    name = str(action.get("routine"))
    if name in config.routines:
        return []
    known = ", ".join(sorted(config.routines)) or "none defined in monitors.toml"
    return [("action.routine", f"unknown routine {name!r} (known: {known})")]


def from_flag(value: str, prompt: str | None) -> dict[str, Any]:
    """The action ``monitors add --routine NAME [--prompt TEXT]`` writes."""
    return {"type": TYPE, "routine": value, "prompt": prompt}


def resolve(spec: RoutineSpec, config: ActionsConfig) -> CommandSpec:
    """Return the command a ``routine`` action spawns (timeout and overlap resolved).

    Raises:
        errors.NotFoundError: the routine is not in ``[routines]``.
    """
    found = config.routines.get(spec.routine)
    if found is None:
        known = ", ".join(sorted(config.routines)) or "none defined"
        raise errors.NotFoundError(
            f"unknown routine {spec.routine!r} (known: {known}; see [routines])")
    return CommandSpec(
        name=found.name,
        argv=found.argv,
        cwd=found.cwd,
        env=found.env,
        timeout=found.timeout or options.DEFAULT_RUN_TIMEOUT,
        overlap=found.overlap or "skip",
    )


async def fire(d: Dispatcher, monitor: Monitor, event: Event, spec: RoutineSpec, *,
               recovered: bool) -> None:
    """Resolve the routine, render the prompt and hand the run to the overlap queue.

    Raises:
        errors.MonitorsError: an unknown routine or a template that does not render.
    """
    from reconciler.actions import templating

    command = resolve(spec, d.config)
    prompt = await d.render(spec.prompt or DEFAULT_PROMPT, templating.context(monitor, event))
    await d.runs.admit(monitor, event, kind=TYPE, spec=command, prompt=prompt)
