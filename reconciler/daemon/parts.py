"""The daemon's collaborators, built once at start: store, dispatcher, guards, sources, engine.

``build`` refuses an untrusted monitors.toml that defines agents or routines
(``config.trust``), then wires the parts together: the guards notify through the
dispatcher, the engine polls through the source context and fires through the
dispatcher, the supervisor starts and stops evaluators on the engine. The heavy
runtime modules (httpx, jinja2, apprise) are imported here, at start, not when
the daemon package is imported. No reconcile logic here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler import redaction, settings, timestamps
from reconciler.daemon import supervisor
from reconciler.state import registry as registry_mod

if TYPE_CHECKING:
    from reconciler.actions import dispatch, guards
    from reconciler.daemon import evaluator
    from reconciler.sources.context import SourceContext
    from reconciler.state import store as store_mod


@dataclass(slots=True)
class Parts:
    """What one daemon runs with (``build``); ``ctx.settings``/``ctx.fleet`` follow SIGHUP."""

    store: store_mod.Store
    dispatcher: dispatch.Dispatcher
    guard: guards.Guards
    ctx: SourceContext
    engine: evaluator.Engine
    supervisor: supervisor.Supervisor


def build(cfg: settings.Settings, registry: registry_mod.Registry, *,
          redactor: redaction.Redactor, on_autopause: Callable[[str], None],
          spread_first_polls: bool = True) -> Parts:
    """Build the parts for ``cfg``; the supervisor keeps ``registry`` up to date.

    Args:
        redactor: shared by sources, engine, dispatcher and the log.
        on_autopause: called with a monitor's name when the rate limit auto-pauses it.
        spread_first_polls: spread the first polls of monitors started together
            (``evaluator.FIRST_POLL_RATE``); False for ``run --once``, which polls each
            monitor once and exits, so waiting only adds to its time.

    Raises:
        errors.ConfigError: an action section of monitors.toml is invalid (an
            untrusted monitors.toml is refused before, by ``settings.load``).
    """
    from reconciler import fleet
    from reconciler.actions import dispatch, guards
    from reconciler.daemon import evaluator, metrics
    from reconciler.sources.context import SourceContext
    from reconciler.state import store as store_mod

    store = store_mod.Store(cfg.state_dir)
    dispatcher = dispatch.build(store, cfg.toml, state_dir=cfg.state_dir, root=cfg.root,
                                redactor=redactor)
    guard = guards.build(store, dispatcher)
    guard.on_autopause = on_autopause
    dispatcher.on_finish = metrics.fire_finished
    ctx = SourceContext.create(store=store, fleet=fleet.load(cfg.fleet_file),
                                       settings=cfg, redactor=redactor)
    engine = evaluator.Engine(
        store, dispatcher, ctx=ctx, guard=guard,
        first_poll_rate=evaluator.FIRST_POLL_RATE if spread_first_polls else None)
    if cfg.section("etcd"):  # failover owners: leases and the etcd gateway only then
        from reconciler.daemon import leases

        engine.owners = leases.build(cfg, redactor=redactor)
    return Parts(store=store, dispatcher=dispatcher, guard=guard, ctx=ctx, engine=engine,
                 supervisor=supervisor.Supervisor(engine, store, registry,
                                                  now=timestamps.utc_seconds))
