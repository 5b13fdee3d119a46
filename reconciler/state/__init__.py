"""Per-machine running state (DESIGN.md §4): the lock, versioned records, the
running registry and the store (atomic writes are the leaf ``reconciler.atomic``).

It must not import ``config`` (its sibling) or any layer above it: what the
running registry needs from a monitor (its JSON, its hash) it computes itself.

Layout under the state directory::

    daemon.lock                           one daemon per state directory (fcntl.flock)
    running.json                          the daemon's running registry (``state.registry``)
    monitors/<name>/state.json            condition state: fingerprint, baseline, last signature
    monitors/<name>/liveness.json         heartbeat of every check (coalesced, not fsynced)
    monitors/<name>/autopause.json        a rate-limit auto-pause (survives restarts)
    monitors/<name>/lifecycle.json        a self-ending monitor: first start, fires, completion
    monitors/<name>/pid-marker.json       pid sources: the watched pid was seen running
    monitors/<name>/drought.json          drought alarms the owner has been told about
    monitors/<name>/fires/<id>/event.json one fire record per fire (output.log, prompt.txt)
    notifications.log                     the built-in ``log`` channel (appended, fsynced)

Rules this package keeps: every record write is atomic (temp file in the same directory,
rename); state and fire records are fsynced, file and directory, before anyone acts
on them; a poll writes O(1) bytes, never the whole store; every record carries a
format ``version``; a record from a future version is kept and reported, never run
or overwritten; a corrupt record is moved aside (never deleted) and reported.

No asyncio here: callers run durable writes off the event loop (``asyncio.to_thread``).
"""
