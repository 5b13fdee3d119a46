"""The route registry: which modules serve routes on the daemon's HTTP server.

Each module in ``MODULES`` has a ``ROUTES`` tuple of ``app.Route``. Adding an
endpoint is one module and one line here (a webhook receiver: ``"hooks"`` with
``auth="self"`` routes); nothing else changes.
"""

from __future__ import annotations

import importlib

from reconciler.server.app import Route

MODULES: tuple[str, ...] = ("health", "v1", "metrics", "page")
"""Module names under ``reconciler.server``, in registration order."""


def all_routes() -> list[Route]:
    """Every route of every module in ``MODULES``."""
    out: list[Route] = []
    for name in MODULES:
        module = importlib.import_module(f"reconciler.server.{name}")
        out.extend(module.ROUTES)
    return out
