"""monitors: a declarative, GitOps-style reconciler for event-triggered watchers.

The package is laid out along the data flow of DESIGN.md §3::

    config/    files -> resolved monitors (no click, no asyncio)
    planning/  desired set vs running registry -> Plan (pure)
    state/     atomic writes, the lock, versioned records, the store
    sources/   one module per source type (observe)
    conditions/ one module per condition mode (decide, pure)
    actions/   one module per action type (dispatch)
    daemon/    evaluators, supervisor, watch, control API
    render/    text | json | github renderers (never compute)
    cli/       click only here

Layers import downward only.
"""

__version__ = "0.1.0"
