"""The status page's HTML (``GET /``, ``server.page``): Jinja2, sandboxed, autoescaped.

Rendered in the view helper process (``server.jobs.page_html``), never on the
daemon's event loop: the page of 1,000 monitors (320 KB) takes 10-35 ms of CPU, a
step during which no poll could start. This module imports neither aiohttp nor the
daemon, so the helper's start-up stays small; ``server.page`` keeps the access rules.
Monitor names, errors and other text from watched sources are escaped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reconciler import timestamps

REFRESH = 10
"""Seconds between the page's reloads (``<meta http-equiv="refresh">``)."""
TEMPLATES = Path(__file__).with_name("templates")
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
           "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
"""Headers of every HTML answer: never cached, no sniffing, no script, no remote style."""

_env: Any = None


def environment() -> Any:
    """The sandboxed, autoescaping Jinja2 environment over ``templates/`` (built once)."""
    global _env
    if _env is None:
        from jinja2 import FileSystemLoader, StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        _env = SandboxedEnvironment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                                    undefined=StrictUndefined)
    return _env


def _css(row: dict[str, Any]) -> str:
    live = row.get("liveness") or {}
    status = str(row.get("status", ""))
    if live.get("status") in ("error", "stalled") or row.get("error"):
        return "error"
    if "paused" in status or status in ("disabled",):
        return "paused"
    if "HELD" in status or "held" in status:
        return "held"
    if status != "running":
        return "idle"
    return "ok"


def _rows(device: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for row in doc.get("monitors", []):
        live = row.get("liveness") or {}
        fired = live.get("lastFiredAt")
        owner = str(row.get("owner") or "")
        out.append({
            "name": row.get("name", ""), "status": row.get("status", ""), "css": _css(row),
            "source": row.get("source", ""), "action": row.get("action", ""),
            "liveness": row.get("livenessText", ""),
            "device": device if owner in ("", "this device") else owner,
            "last_fire": timestamps.utc_seconds(float(fired)) if isinstance(
                fired, int | float) else fired,
            "error": row.get("error") or live.get("lastError") or "",
        })
    return out


def html(doc: dict[str, Any], status: dict[str, Any], *, device: str) -> str:
    """The page of ``doc`` (``client.views.rows``'s document) and the daemon's ``status``
    (its ``revision`` and ``generation``), as of now; not yet redacted."""
    revision = status.get("revision") or {}
    commit = str(revision.get("commit") or "")
    shown = (commit[:12] + ("+dirty" if revision.get("dirty") else "")) if commit else "local"
    rendered: str = environment().get_template("status.html").render(
        device=device, refresh=REFRESH, now=timestamps.utc_seconds(),
        revision=shown, generation=status.get("generation", 0),
        problems=doc.get("problems", []), monitors=_rows(device, doc))
    return rendered
