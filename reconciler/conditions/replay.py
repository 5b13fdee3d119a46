"""Replay: a scripted sequence of observations through the real condition logic.

``monitors test NAME --replay FILE`` unit-tests a monitor before it ever runs, as
``promtool test rules`` does for alert rules. Pure: the caller loads the YAML.

File format (a list of steps, or a mapping with ``steps:``)::

    steps:
      - text: "fail build 7"        # an observation (text, optional meta)
        meta: {exitCode: 1}
        fire: true                  # optional expectations
        reason: matched new signature
      - error: "timeout: took 30s"  # a check error: with onError: ignore it never
        fire: false                 # fires and leaves the state; with observe it is
                                    # the observation "error: timeout: took 30s"
      - text: pass
        reason: no match
      - payload: {action: closed, pull_request: {merged: true}}   # pushed: a webhook
        event: pull_request                                       # delivery (event: its
      - frame: '{"status": "red"}'                                # name), a ws frame

A ``payload`` (any YAML value, sent as its JSON; a string as it is) or ``frame`` step
is turned into the observation the push source makes of it (its ``select`` applied)
by the caller's ``push`` function (``sources.registry.pushed``); a ``select`` that
fails on it is a check error, as in the engine.

Replay starts from an empty state and persists the state exactly as the engine
does (``Decision.persist``). A monitor with ``stopAfter`` or ``stopWhen`` completes
as in the engine (``conditions.lifecycle``; ``until`` is not replayed: steps carry no
time): the step that completes it says so (``StepResult.completed``) and later steps
are ``completed``, not evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler import conditions, errors
from reconciler.conditions import lifecycle, outage
from reconciler.model import Monitor, Observation

STEP_KEYS = frozenset({"text", "meta", "error", "fire", "reason", "payload", "event", "frame"})
KINDS = ("text", "error", "payload", "frame")
"""A step has exactly one of these."""
ERROR_REASON = "error"
COMPLETED_REASON = "completed"
"""A step after the monitor completed (``until``/``stopAfter``/``stopWhen``): not
evaluated, as the engine would not poll it."""
REASONS = frozenset({*(str(r) for r in conditions.Reason), ERROR_REASON, COMPLETED_REASON})


@dataclass(frozen=True, slots=True)
class Step:
    """One scripted step (``index`` is 1-based)."""

    index: int
    text: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    fire: bool | None = None
    reason: str | None = None
    pushed: bytes | None = None
    event: str | None = None


Push = Callable[[bytes, "str | None"], Observation]
"""``(data, event) -> Observation``: a push source's observation of a pushed step
(raises ``errors.SourceError`` for a failing ``select``)."""


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step did: ``fire``, ``reason`` (``error`` for a check error), the
    signature and summary, and the mismatch with its expectation (None when none)."""

    step: Step
    fire: bool
    reason: str
    signature: str = ""
    summary: str = ""
    mismatch: str | None = None
    completed: str | None = None


def parse(doc: Any, *, file: str) -> list[Step]:
    """Steps from a loaded replay document.

    Raises:
        errors.ConfigError: ``file: steps[N]: what is wrong``.
    """
    raw = doc.get("steps") if isinstance(doc, Mapping) else doc
    if isinstance(doc, Mapping) and set(doc) - {"steps"}:
        extra = ", ".join(sorted(str(k) for k in set(doc) - {"steps"}))
        raise errors.ConfigError(f"{file}: unknown top-level key(s): {extra} (expected steps)")
    if not isinstance(raw, list) or not raw:
        raise errors.ConfigError(f"{file}: expected a non-empty list of steps (or steps: [...])")
    steps: list[Step] = []
    for i, item in enumerate(raw, start=1):
        where = f"{file}: steps[{i}]"
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise errors.ConfigError(f"{where}: expected a mapping with text or error")
        unknown = set(item) - STEP_KEYS
        if unknown:
            raise errors.ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
                                     f"(allowed: {', '.join(sorted(STEP_KEYS))})")
        if sum(k in item for k in KINDS) != 1:
            raise errors.ConfigError(f"{where}: give exactly one of {', '.join(KINDS)}")
        text, error = item.get("text"), item.get("error")
        pushed = _pushed(item, where)
        event = item.get("event")
        if event is not None and not isinstance(event, str):
            raise errors.ConfigError(f"{where}: event: expected a string")
        if text is not None and not isinstance(text, str):
            raise errors.ConfigError(f"{where}: text: expected a string (quote it)")
        if error is not None and not isinstance(error, str):
            raise errors.ConfigError(f"{where}: error: expected a string")
        meta = item.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise errors.ConfigError(f"{where}: meta: expected a mapping")
        fire = item.get("fire")
        if fire is not None and not isinstance(fire, bool):
            raise errors.ConfigError(f"{where}: fire: expected true or false")
        reason = item.get("reason")
        if reason is not None and reason not in REASONS:
            raise errors.ConfigError(f"{where}: reason: {reason!r} is not one of "
                                     f"{', '.join(sorted(REASONS))}")
        steps.append(Step(i, text, dict(meta), error, fire, reason, pushed, event))
    return steps


def _pushed(item: Mapping[str, Any], where: str) -> bytes | None:
    """The bytes of a ``payload`` (JSON of any value; a string as it is) or ``frame``."""
    if "frame" in item:
        if not isinstance(item["frame"], str):
            raise errors.ConfigError(f"{where}: frame: expected a string")
        return str(item["frame"]).encode()
    if "payload" in item:
        value = item["payload"]
        return value.encode() if isinstance(value, str) else json.dumps(value).encode()
    return None


def replay(monitor: Monitor, steps: list[Step], *,
           on_error: str = outage.IGNORE, push: Push | None = None) -> list[StepResult]:
    """Run ``steps`` through ``conditions.decide`` from an empty state.

    Args:
        on_error: the monitor's effective ``condition.onError``
            (``sources.registry.on_error``): with ``observe`` an ``error:`` step is
            the error observation the engine would make (``outage.parse_step``).
        push: turns ``payload``/``frame`` steps into observations (module docstring).

    Raises:
        re.error: a condition regex does not compile.
        errors.UsageError: a ``payload``/``frame`` step and no ``push`` (not a push source).
    """
    state: dict[str, Any] | None = None
    out: list[StepResult] = []
    fires, done = 0, None
    life = monitor.lifecycle
    for step in steps:
        ended: str | None = None
        pushed: Observation | None = None
        if step.pushed is not None and done is None:
            if push is None:
                raise errors.UsageError(f"steps[{step.index}]: {monitor.name} is not a push "
                                        "source (payload and frame steps are for webhook, ws)")
            try:
                pushed = push(step.pushed, step.event)
            except errors.SourceError as e:
                step = replace(step, error=str(e))
        if done is not None:
            fire, reason, sig, summary = False, COMPLETED_REASON, "", done
        elif step.error is not None and on_error != outage.OBSERVE:
            fire, reason, sig, summary = False, ERROR_REASON, "", step.error
        else:
            observation = (outage.parse_step(step.error) if step.error is not None
                           else pushed or Observation(step.text or "", step.meta))
            decision = conditions.decide(monitor, observation, state)
            if decision.persist:
                state = decision.state
            fire, reason = decision.fire, str(decision.reason)
            sig, summary = decision.signature, decision.summary
            if life is not None:
                fires += fire
                ended = done = lifecycle.outcome(
                    replace(life, until_at=None, until_after=None),
                    lifecycle.Progress(0.0, fires), now=0.0, observation=observation.text)
        problems = []
        if step.fire is not None and step.fire != fire:
            problems.append(f"expected fire: {_yn(step.fire)}, got {_yn(fire)}")
        if step.reason is not None and step.reason != reason:
            problems.append(f"expected reason {step.reason!r}, got {reason!r}")
        out.append(StepResult(step, fire, reason, sig, summary,
                              "; ".join(problems) if problems else None, ended))
    return out


def _yn(value: bool) -> str:
    return "yes" if value else "no"
