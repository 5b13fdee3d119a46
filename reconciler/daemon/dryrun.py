"""``monitors test``: one evaluation of a monitor against its stored state, nothing written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reconciler import conditions, errors, events
from reconciler.conditions import outage
from reconciler.daemon import clock as clock_mod
from reconciler.daemon.polls import load_state, make_event
from reconciler.model import Monitor, Observation
from reconciler.sources import push
from reconciler.sources import registry as source_types
from reconciler.state import store as store_mod

if TYPE_CHECKING:
    from reconciler.sources.context import SourceContext


@dataclass(frozen=True, slots=True)
class DryRun:
    """``monitors test``: one evaluation against the stored state, nothing written.

    Attributes:
        monitor: the monitor.
        observation: what the source saw (None on a check error, unless
            ``condition.onError`` observes it: then the error observation).
        decision: the decision against the stored state (None on an unobserved
            check error).
        event: the event a fire would send (built even when it would not fire).
        previous: the stored condition state it was judged against.
        error: the check error's one line, or why the monitor would not run.
        paused: the auto-pause reason when auto-paused (it would not be polled).
    """

    monitor: Monitor
    observation: Observation | None = None
    decision: conditions.Decision | None = None
    event: events.Event | None = None
    previous: Mapping[str, Any] | None = None
    error: str | None = None
    paused: str | None = None


async def dry_run(monitor: Monitor, *, store: store_mod.Store, ctx: SourceContext,
                  clock: clock_mod.Clock = clock_mod.REAL,
                  pushed: Observation | errors.SourceError | None = None) -> DryRun:
    """Observe ``monitor`` once and decide against its stored state, writing nothing
    (``store`` should be read-only and ``ctx.dry_run`` set). Never raises for check
    errors: they come back in ``error``. Observation and error are redacted with
    ``ctx.redactor``, as the engine does. ``pushed``: what a push source was handed
    (``sources.registry.pushed``: a webhook delivery, a ws frame) instead of observing;
    a push source without it is the error "nothing to poll".

    Raises:
        errors.StateError: the stored state cannot be read (future version, I/O).
    """
    previous, _ = load_state(store, monitor)
    pause = store.autopause(monitor.name)
    paused = str(pause.get("reason") or "rate limit") if pause else None
    if pushed is None and source_types.is_pushed(monitor):
        return DryRun(monitor, previous=previous, error=push.nothing_to_poll(monitor),
                      paused=paused)
    check_error: str | None = None
    try:
        if isinstance(pushed, errors.SourceError):
            raise pushed
        seen = pushed if pushed is not None else await source_types.observe(monitor, ctx)
        observation = ctx.redactor.observation(seen)
    except errors.SourceError as e:
        check_error = ctx.redactor.redact(str(e))
        observed = outage.observation(source_types.on_error(monitor), e.kind,
                                      str(e.args[0]) if e.args else "", permanent=e.permanent)
        if observed is None:
            return DryRun(monitor, previous=previous, error=check_error, paused=paused)
        observation = ctx.redactor.observation(observed)
    try:
        decision = conditions.decide(monitor, observation, previous)
    except re.error as e:
        return DryRun(monitor, observation, previous=previous,
                      error=f"config: condition regex does not compile: {e}", paused=paused)
    event = make_event(monitor, decision, observation, at=clock.time())
    return DryRun(monitor, observation, decision, event, previous, error=check_error,
                  paused=paused)

