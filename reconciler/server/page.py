"""``GET /``: the status page, rendered on the server (Jinja2, sandboxed, autoescaped).

Every monitor of this device with its status, liveness, last fire, error,
pause or completion, device and the applied revision; the page reloads itself
(``<meta http-equiv="refresh">``, every ``REFRESH`` seconds) and its grid folds
to one column on a phone. No JavaScript.

Access (``Route.auth = "page"``): a ``monitors_session`` cookie from an earlier
visit, or a ``monitors_token`` cookie holding the token, or ``?token=<token>``
once: then the page sets a session cookie (HttpOnly, SameSite=Strict, Secure
under TLS) and redirects to ``/`` so the token leaves the address bar and the
history. With ``[http] openOnLoopback = true`` a loopback client needs none.
Monitor names, errors and other text from watched sources are escaped.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from reconciler import timestamps, tokens
from reconciler.server.app import Context, Route, context

REFRESH = 10
SESSION_COOKIE = "monitors_session"
TOKEN_COOKIE = "monitors_token"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000
TEMPLATES = Path(__file__).with_name("templates")

_env: Any = None
_sessions: dict[str, float] = {}  # session id -> expiry (time.time())


def environment() -> Any:
    """The sandboxed, autoescaping Jinja2 environment over ``templates/`` (built once)."""
    global _env
    if _env is None:
        from jinja2 import FileSystemLoader, StrictUndefined
        from jinja2.sandbox import SandboxedEnvironment

        _env = SandboxedEnvironment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                                    undefined=StrictUndefined)
    return _env


def _loopback(request: web.Request) -> bool:
    try:
        return ipaddress.ip_address(request.remote or "").is_loopback
    except ValueError:
        return False


def _session_ok(request: web.Request) -> bool:
    sid = request.cookies.get(SESSION_COOKIE, "")
    expiry = _sessions.get(sid) if sid else None
    return expiry is not None and expiry > time.time()


def _new_session() -> str:
    now = time.time()
    for sid in [s for s, exp in _sessions.items() if exp <= now]:
        del _sessions[sid]
    while len(_sessions) >= MAX_SESSIONS:
        del _sessions[min(_sessions, key=_sessions.__getitem__)]
    sid = secrets.token_urlsafe(32)
    _sessions[sid] = now + SESSION_SECONDS
    return sid


def _html(name: str, status: int = 200, **values: Any) -> web.Response:
    return web.Response(text=environment().get_template(name).render(**values), status=status,
                        content_type="text/html", charset="utf-8",
                        headers={"Cache-Control": "no-store",
                                 "X-Content-Type-Options": "nosniff",
                                 "Content-Security-Policy": "default-src 'none'; "
                                 "style-src 'unsafe-inline'"})


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


def _rows(ctx: Context, doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for row in doc.get("monitors", []):
        live = row.get("liveness") or {}
        fired = live.get("lastFiredAt")
        owner = str(row.get("owner") or "")
        out.append({
            "name": row.get("name", ""), "status": row.get("status", ""), "css": _css(row),
            "source": row.get("source", ""), "action": row.get("action", ""),
            "liveness": row.get("livenessText", ""),
            "device": ctx.daemon.cfg.device if owner in ("", "this device") else owner,
            "last_fire": timestamps.utc_seconds(float(fired)) if isinstance(
                fired, int | float) else fired,
            "error": row.get("error") or live.get("lastError") or "",
        })
    return out


async def status_page(request: web.Request) -> web.StreamResponse:
    """The page, or a sign-in note (401), or the redirect after ``?token=``."""
    ctx = context(request)
    device = ctx.daemon.cfg.device
    given = request.query.get("token")
    if given is not None:
        if not tokens.matches(given, ctx.token):
            return _html("login.html", 401, device=device, message="That token is wrong.")
        response = web.Response(status=303, headers={"Location": "/",
                                                     "Cache-Control": "no-store"})
        response.set_cookie(SESSION_COOKIE, _new_session(), httponly=True, samesite="Strict",
                            secure=ctx.options.cert_file is not None, max_age=SESSION_SECONDS,
                            path="/")
        return response
    allowed = (_session_ok(request)
               or tokens.matches(request.cookies.get(TOKEN_COOKIE), ctx.token)
               or (ctx.options.open_on_loopback and _loopback(request)))
    if not allowed:
        return _html("login.html", 401, device=device,
                     message="This page needs the daemon's token.")
    doc = await ctx.rows()
    status = ctx.status()
    revision = status.get("revision") or {}
    commit = str(revision.get("commit") or "")
    shown = (commit[:12] + ("+dirty" if revision.get("dirty") else "")) if commit else "local"
    html = environment().get_template("status.html").render(
        device=device, refresh=REFRESH, now=timestamps.utc_seconds(),
        revision=shown, generation=status.get("generation", 0),
        problems=doc.get("problems", []), monitors=_rows(ctx, doc))
    return web.Response(text=ctx.redactor.redact(html), content_type="text/html",
                        charset="utf-8", headers={"Cache-Control": "no-store",
                                                  "X-Content-Type-Options": "nosniff",
                                                  "Content-Security-Policy": "default-src "
                                                  "'none'; style-src 'unsafe-inline'"})


ROUTES = (Route("GET", "/", status_page, auth="page"),)
