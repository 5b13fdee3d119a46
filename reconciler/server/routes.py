"""The route registry: which modules serve routes on the daemon's HTTP server.

Each module in ``MODULES`` has a ``ROUTES`` tuple of ``app.Route``, and may have
``ON_START``: ``async (ctx)`` run once the server listens (``server.hooks`` evaluates
the deliveries a crash left in the spool). Adding an
endpoint is one module and one line here (a webhook receiver: ``"hooks"`` with
``auth="self"`` routes); nothing else changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from reconciler.server.app import Route

MODULES: tuple[str, ...] = ("health", "v1", "metrics", "page", "hooks")
"""Module names under ``reconciler.server``, in registration order."""


def all_routes() -> list[Route]:
    """Every route of every module in ``MODULES``."""
    out: list[Route] = []
    for name in MODULES:
        module = importlib.import_module(f"reconciler.server.{name}")
        out.extend(module.ROUTES)
    return out


def start_hooks() -> list[Callable[[Any], Awaitable[None]]]:
    """The ``ON_START`` of every module in ``MODULES`` that has one, in order."""
    out = []
    for name in MODULES:
        hook = getattr(importlib.import_module(f"reconciler.server.{name}"), "ON_START", None)
        if hook is not None:
            out.append(hook)
    return out
