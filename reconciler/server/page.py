"""``GET /``: the status page, rendered on the server (``server.pageview``: Jinja2,
sandboxed, autoescaped) in the view helper process (``server.jobs``), at most once
a second however many browsers ask (``Context.view``).

Every monitor of this device with its status, liveness, last fire, error,
pause or completion, device and the applied revision; the page reloads itself
(``<meta http-equiv="refresh">``, every ``pageview.REFRESH`` seconds) and its grid folds
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
from typing import Any

from aiohttp import web

from reconciler import tokens
from reconciler.server import jobs, pageview
from reconciler.server.app import Route, context

SESSION_COOKIE = "monitors_session"
TOKEN_COOKIE = "monitors_token"
SESSION_SECONDS = 12 * 3600
MAX_SESSIONS = 1000

_sessions: dict[str, float] = {}  # session id -> expiry (time.time())


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
    return web.Response(text=pageview.environment().get_template(name).render(**values),
                        status=status, content_type="text/html", charset="utf-8",
                        headers=pageview.HEADERS)


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
    body = await ctx.view(jobs.page_html)  # rendered in the helper process
    return web.Response(body=body, content_type="text/html", charset="utf-8",
                        headers=pageview.HEADERS)


ROUTES = (Route("GET", "/", status_page, auth="page"),)
