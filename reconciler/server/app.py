"""The HTTP server: routes, bearer-token authentication, limits, JSON errors.

``HttpServer`` is a ``daemon.options.Service``: ``monitors run`` builds it when
``[http] listen`` is not empty and the daemon starts it before its ready line.
It serves the routes of ``server.routes`` (each a ``Route``) on one aiohttp
application (aiohttp: asyncio-native, so it shares the daemon's event loop and
needs no second server process or thread).

Every route declares how it is authenticated (``Route.auth``):

* ``"token"``: ``Authorization: Bearer <token>`` equal to this device's token
  (``reconciler.tokens``, compared in constant time), else 401 with
  ``WWW-Authenticate: Bearer`` (RFC 6750 section 3);
* ``"open"``: no authentication (``/healthz``, ``/readyz``);
* ``"page"``: the status page's own rule (``server.page``: cookie or ``?token=``);
* ``"self"``: the handler authenticates the request itself (a webhook receiver
  checking a signature over the raw body).

Limits: a body over the route's ``max_body`` (default ``[http] maxBodyBytes``) is
413 before it is read; a request over ``[http] requestTimeout`` is 503 (or, when its
answer had begun to go out to a client reading too slowly, its connection is
dropped), and a connection idle (or sending an unfinished request) that long is closed; aiohttp
answers a malformed request line or header with 400. Requests (but the probes) take
turns on the loop (``server.admission``: a few at once, and a bounded share of the
loop's time, so that polls stay on time under load). Every error is JSON
``{"apiVersion": "v1", "error": "one line"}``; an error of the daemon's own files or
state (``errors.MonitorsError``, e.g. an unreadable state directory) is a 503 with its
line; an unexpected exception is a 500
with its type name, logged once, and never reaches the daemon. Every JSON answer
goes through the daemon's ``Redactor`` (the token itself is registered there), so
no secret value is ever answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import web

from reconciler import errors, redaction
from reconciler.server import jobs, logs, offload, sendout
from reconciler.server.admission import Admission
from reconciler.server.options import HttpOptions, ssl_context

if TYPE_CHECKING:
    from reconciler.daemon.main import Daemon
    from reconciler.settings import Settings

log = logging.getLogger("monitors.http")

API_VERSION = jobs.API_VERSION
SHARED_TTL = 1.0
"""Seconds one computation of a shared answer (the monitor rows of ``client.views.rows``,
the ``/metrics`` exposition) serves every request: 200 clients polling ``/v1/monitors``
cost one read of the layers and one encoding a second."""
SHARED_COST = 5.0
"""A shared answer that took ``t`` seconds to make is kept at least ``SHARED_COST * t``."""

MAX_UPLOADS = 4
"""Request bodies read at once. Bodies are read before the request takes its turn
(``server.admission``), so a client sending its body slowly delays other uploads only,
never a ``GET``; the limit bounds the bodies held in memory (``maxBodyBytes`` each)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Auth = Literal["token", "open", "page", "self"]


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint.

    Attributes:
        method: ``GET``, ``POST``...
        path: an aiohttp path pattern (``/v1/monitors/{name}``).
        handler: ``async (request) -> response``; ``context(request)`` gives the daemon.
            Unless ``auth`` is ``"open"`` it runs, and its answer is written, within
            its turn of ``Context.admission`` (``server.admission``: a few at once, a
            bounded share of the loop's time): a handler that waits on something slow
            should answer first (202) rather than hold its turn.
        auth: how the request is authenticated (module docstring).
        max_body: bytes the body may have (None: ``[http] maxBodyBytes``).
        refused: called with the request and the status when the guard refuses it
            (413) before the handler runs (a webhook receiver counts its refusals).
        precheck: what refuses a request from its headers alone, before its body is
            read (``auth="self"`` routes: an unknown monitor, no signature header);
            returns the answer, or None to go on.
    """

    method: str
    path: str
    handler: Handler
    auth: Auth = "token"
    max_body: int | None = None
    refused: Callable[[web.Request, int], None] | None = None
    precheck: Callable[[web.Request], web.StreamResponse | None] | None = None


class Context:
    """What handlers reach: the daemon, the options, the token, shared answers.

    Attributes:
        daemon: the running daemon (registry, operations, reconciler, parts).
        options: ``[http]``.
        token: this device's token, or None (then every ``"token"`` route is 401).
        redactor: the daemon's redactor.
        started: ``time.time()`` when the server started.
    """

    def __init__(self, daemon: Daemon, options: HttpOptions, token: str | None) -> None:
        self.daemon = daemon
        self.options = options
        self.token = token
        self.redactor: redaction.Redactor = daemon.redactor
        if token:
            self.redactor.add(token)
        self.started = time.time()
        self.parts: dict[str, Any] = {}
        """What route modules keep for the server's life, by module (``server.hooks``'s
        receiver)."""
        self.sender = sendout.Sender()
        """The thread writing large answers' bodies (``server.sendout``)."""
        self.admission = Admission(also=lambda: self.sender.cpu)
        """Slots and loop-time budget of the requests that wait their turn
        (``server.admission``), the sender thread's CPU included."""
        self.offload = offload.Offload()
        """The helper process of the heavy views (``server.offload``)."""
        self.uploads = asyncio.Semaphore(MAX_UPLOADS)
        """Request bodies read at once (``MAX_UPLOADS``), before their request's turn."""
        self._shared: dict[str, tuple[float, Any, float]] = {}  # key -> (at, value, cost)
        self._making: dict[str, asyncio.Future[Any]] = {}

    def status(self) -> dict[str, Any]:
        """The daemon's control-socket ``status`` reply (``daemon.operations``)."""
        return dict(self.daemon.operations.status())

    async def shared(self, key: str, make: Callable[[], Awaitable[Any]], *,
                     ttl: float = SHARED_TTL) -> Any:
        """``await make()``, made at most once per ``ttl`` seconds for ``key`` (or per
        ``SHARED_COST`` times what the last one took, when longer) and shared by every
        concurrent caller: one computation however many clients ask, and at most a fifth
        of the time spent making it."""
        hit = self._shared.get(key)
        if hit is not None and time.monotonic() - hit[0] < max(ttl, SHARED_COST * hit[2]):
            return hit[1]
        making = self._making.get(key)
        if making is None:
            making = self._making[key] = asyncio.ensure_future(self._make(key, make))
        return await asyncio.shield(making)

    async def _make(self, key: str, make: Callable[[], Awaitable[Any]]) -> Any:
        try:
            started = time.monotonic()
            value = await make()
            now = time.monotonic()
            self._shared[key] = (now, value, now - started)
            return value
        finally:
            self._making.pop(key, None)

    async def view(self, job: Callable[[Settings, dict[str, Any], tuple[str, ...]], bytes]
                   ) -> bytes:
        """The answer ``job(cfg, status, secrets)`` (``server.jobs``: ``rows_json``,
        ``fingerprints_json``, ``page_html``) makes in the helper process
        (``server.offload``), redacted there, made at most once per ``SHARED_TTL``
        seconds for each job (``shared``).

        Raises:
            errors.StateError: the helper process could not start or died.
            errors.MonitorsError: the job's own error (unreadable state or layers).
        """
        async def make() -> bytes:
            return await self.offload.run(job, self.daemon.cfg, self.status(),
                                          self.redactor.secrets)

        body: bytes = await self.shared(job.__name__, make)
        return body

    def authorized(self, request: web.Request) -> bool:
        """Whether ``request`` carries ``Authorization: Bearer <this device's token>``."""
        from reconciler import tokens

        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and tokens.matches(given.strip(), self.token)

    def json(self, data: Mapping[str, Any], *, status: int = 200,
             headers: Mapping[str, str] | None = None) -> web.Response:
        """A JSON answer with ``apiVersion`` first, redacted (``jobs.encode``)."""
        return web.Response(text=jobs.encode(data, self.redactor), status=status,
                            content_type="application/json", headers=headers)


CONTEXT = web.AppKey("monitors.context", Context)


def context(request: web.Request) -> Context:
    """The ``Context`` of the server answering ``request``."""
    return request.app[CONTEXT]


def error(request: web.Request, status: int, message: str,
          headers: Mapping[str, str] | None = None) -> web.Response:
    """The JSON error answer ``{"apiVersion", "error"}`` (redacted)."""
    return context(request).json({"error": message}, status=status, headers=headers)


_RESET = struct.pack("ii", 1, 0)
"""``struct linger {l_onoff = 1, l_linger = 0}``: ``close(2)`` resets the connection
and discards what the kernel has not sent (socket(7), SO_LINGER)."""


def drop(request: web.BaseRequest) -> None:
    """Drop ``request``'s connection at once, by a reset: a plain close would leave what
    the kernel's send buffer holds for a client that stopped reading (megabytes on
    loopback) to trickle out to it for minutes, on a socket no longer ours."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # closed meanwhile
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    transport.abort()


def _guard(route: Route, options: HttpOptions) -> Handler:
    limit = route.max_body if route.max_body is not None else options.max_body

    async def handle(request: web.Request) -> web.StreamResponse:
        ctx = context(request)
        if route.auth == "token" and not ctx.authorized(request):
            why = ("this daemon has no token (run `monitors token create`, then restart it)"
                   if not ctx.token else "missing or wrong bearer token")
            return error(request, 401, f"unauthorized: {why}",
                         headers={"WWW-Authenticate": 'Bearer realm="monitors"'})
        if request.content_length is not None and request.content_length > limit:
            if route.refused is not None:
                route.refused(request, 413)
            return error(request, 413, f"request body over {limit} bytes")
        if limit + 1 != request.client_max_size:  # aiohttp refuses sizes >= its limit
            request = request.clone(client_max_size=limit + 1)
        response: web.StreamResponse | None = None
        try:
            async with asyncio.timeout(options.timeout):
                if route.auth == "open":  # probes never wait their turn
                    return await route.handler(request)
                refused = route.precheck(request) if route.precheck is not None else None
                if refused is not None:
                    return refused
                if request.body_exists:  # read before the turn: a slow upload holds none
                    async with ctx.uploads:
                        try:
                            await request.read()  # kept: the handler's read() returns it
                        except web.HTTPRequestEntityTooLarge:
                            if route.refused is not None:
                                route.refused(request, 413)
                            return error(request, 413, f"request body over {limit} bytes")
                async with ctx.admission.turn():
                    response = await route.handler(request)
                    writer = await response.prepare(request)
                    writing = asyncio.ensure_future(  # a large body by the sender thread
                        ctx.sender.write_eof(request, response, writer))
                    try:  # one step: the write (or its hand-over) is in the turn ...
                        await asyncio.sleep(0)
                    except BaseException:
                        writing.cancel()
                        raise
                try:
                    await writing  # ... the wait for a slow client to read it is not
                except ConnectionError:  # the client went away: nothing more to say
                    drop(request)
                return response
        except TimeoutError:
            if response is not None and response.prepared:  # its status line went out:
                drop(request)  # a second answer would corrupt the stream
                return response
            return error(request, 503, f"request took longer than {options.timeout:g}s")

    return handle


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as JSON; an unexpected exception is one 500 and one log line."""
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        message = e.text if e.text and not e.text.startswith(f"{e.status}:") else e.reason
        return error(request, e.status, message, headers={
            k: v for k, v in e.headers.items() if k in ("Allow", "WWW-Authenticate")})
    except errors.MonitorsError as e:  # the daemon's files or state, not the request
        return error(request, 503, str(e))
    except Exception as e:
        log.exception("http: %s %s failed", request.method, request.path)
        return error(request, 500, f"internal error ({type(e).__name__}); see the daemon log")


def build(ctx: Context, routes: Iterable[Route]) -> web.Application:
    """The aiohttp application serving ``routes`` with ``ctx``."""
    routes = list(routes)
    biggest = max([ctx.options.max_body, *(r.max_body or 0 for r in routes)])
    app = web.Application(middlewares=[_errors], client_max_size=biggest + 1)
    app[CONTEXT] = ctx
    for route in routes:
        app.router.add_route(route.method, route.path, _guard(route, ctx.options))
    return app


class HttpServer:
    """The daemon's HTTP server (a ``daemon.options.Service``).

    Args:
        daemon: the daemon it serves.
        options: ``[http]``.
        token: this device's token (None: only open routes answer).
        routes: the routes (default: every module of ``server.routes``, whose
            ``ON_START`` hooks then run once it listens; given routes run none).
    """

    def __init__(self, daemon: Daemon, options: HttpOptions, token: str | None, *,
                 routes: Iterable[Route] | None = None) -> None:
        from reconciler.server import routes as routes_mod

        self.ctx = Context(daemon, options, token)
        self.routes = list(routes) if routes is not None else routes_mod.all_routes()
        self._start_hooks = routes_mod.start_hooks() if routes is None else []
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    async def start(self) -> None:
        """Bind and serve; record the bound URL in the daemon's ``status`` (``endpoints``).

        Raises:
            errors.ConfigError: TLS files unusable, or the address cannot be bound
                (in use, not local, permission).
        """

        options = self.ctx.options
        logs.quiet_aiohttp()
        tls = ssl_context(options)
        host, port = options.host_port
        # keepalive_timeout also closes a connection that never completes its request
        # (aiohttp's default is an hour: a slowloris held a descriptor each that long)
        runner = web.AppRunner(build(self.ctx, self.routes), access_log=None,
                               handle_signals=False, shutdown_timeout=1.0,
                               keepalive_timeout=options.timeout)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=tls, reuse_address=True)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise errors.ConfigError(
                f"http.listen {options.listen}: cannot listen: {e.strerror or e} (set "
                f"[http] listen in monitors.toml, or \"\" to turn the HTTP API off)") from e
        self._runner = runner
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else str(bound[0])
        self.url = f"{'https' if tls else 'http'}://{shown}:{bound[1]}"
        self.ctx.daemon.operations.endpoints["http"] = self.url
        for start in self._start_hooks:
            await start(self.ctx)
        log.info("http: listening on %s%s", self.url,
                 "" if self.ctx.token else " (no token: only /healthz and /readyz answer; "
                 "run `monitors token create`)")

    async def close(self) -> None:
        """Stop listening; in-flight requests get a second to finish."""
        await self.ctx.offload.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            try:
                await runner.cleanup()
            except Exception:
                log.exception("http: closing the server failed")
        self.ctx.sender.close()
