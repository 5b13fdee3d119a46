"""``POST /hooks/github``, ``/hooks/linear``, ``/hooks/generic/{monitor}``: webhook deliveries.

Authenticated by their signature, not the bearer token (``auth="self"``): the
receiver (``daemon.deliveries.Receiver``) refuses what needs no body (an unknown
generic monitor, no secret, no signature header) before reading it, verifies the
signature over the raw body, refuses
(401, no event), answers a replayed delivery id 200 with no second event, spools the
delivery durably and answers 200 before evaluating it. A body over 25 MiB
(``deliveries.MAX_BODY``, declared or streamed) is 413. Answers are JSON
(``{"apiVersion", "accepted", "event", "monitors"}`` or ``{"apiVersion", "error"}``).
``ON_START`` evaluates what a previous run spooled but did not finish.
"""

from __future__ import annotations

from aiohttp import web

from reconciler.daemon import metrics
from reconciler.daemon.deliveries import MAX_BODY, Receiver
from reconciler.server.app import Context, Route, context

KEY = "hooks"


def receiver(ctx: Context) -> Receiver:
    """The server's one ``Receiver`` (made on first use)."""
    found = ctx.parts.get(KEY)
    if found is None:
        found = ctx.parts[KEY] = Receiver(ctx.daemon)
    assert isinstance(found, Receiver)
    return found


def _provider(request: web.Request) -> str:
    return "generic" if "monitor" in request.match_info else request.path.rsplit("/", 1)[-1]


def _refused(request: web.Request, status: int) -> None:
    metrics.delivery(_provider(request), "too-large")


def _precheck(request: web.Request) -> web.StreamResponse | None:
    """What the receiver refuses from the headers alone, answered before the body is read
    (``Route.precheck``)."""
    ctx = context(request)
    refused = receiver(ctx).precheck(_provider(request), request.headers,
                                     monitor=request.match_info.get("monitor"))
    return None if refused is None else ctx.json(refused.body, status=refused.status)


async def receive(request: web.Request) -> web.StreamResponse:
    """One delivery (module docstring); the guard has read the body within ``MAX_BODY``."""
    ctx = context(request)
    body = await request.read()
    answer = await receiver(ctx).receive(_provider(request), request.headers, body,
                                         monitor=request.match_info.get("monitor"))
    return ctx.json(answer.body, status=answer.status)


async def start(ctx: Context) -> None:
    """Evaluate the deliveries a previous run spooled (``Receiver.drain``)."""
    await receiver(ctx).drain()


ON_START = start

ROUTES = (
    Route("POST", "/hooks/github", receive, auth="self", max_body=MAX_BODY, refused=_refused,
          precheck=_precheck),
    Route("POST", "/hooks/linear", receive, auth="self", max_body=MAX_BODY, refused=_refused,
          precheck=_precheck),
    Route("POST", "/hooks/generic/{monitor}", receive, auth="self", max_body=MAX_BODY,
          refused=_refused, precheck=_precheck),
)
