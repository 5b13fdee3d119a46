"""One HTTP exchange bounded in memory and in time, for the actions that send out.

``httpx``'s ``timeout`` bounds each read, not the exchange, and ``client.post`` reads
the whole body into memory: an endpoint that answers with a body that never ends
(or drips one byte per second) keeps an attempt alive forever and grows the process
without bound. ``request`` streams the answer instead, keeps at most ``BODY_CAP``
bytes of it (what a caller may show), discards the rest, and bounds the whole
exchange (connect, send, headers, body) by ``deadline`` seconds with
``asyncio.timeout``, so a body that never ends is a timeout like any other. (Not
``asyncio.wait_for``: on Python 3.11 it returns the result and drops a cancel that comes
as the exchange ends, and a stopping daemon then waits out a retry backoff.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

BODY_CAP = 64 * 1024
"""Bytes of an answer's body kept (the rest is read and discarded)."""


async def request(client: httpx.AsyncClient, method: str, url: str, *, deadline: float,
                  cap: int = BODY_CAP, **kwargs: Any) -> httpx.Response:
    """Send one request and read its answer within ``deadline`` seconds.

    Args:
        client: the pooled client to send with.
        method, url: as ``httpx.AsyncClient.stream``.
        deadline: seconds for the whole exchange, body included (> 0).
        cap: bytes of the body kept in the returned response (``content``).
        kwargs: passed to ``httpx.AsyncClient.stream`` (``content``, ``headers``,
            ``timeout`` for each read, ...).

    Returns:
        A closed ``httpx.Response`` with the status, the headers and at most ``cap``
        bytes of the (decoded) body.

    Raises:
        httpx.TimeoutException: no complete answer within ``deadline`` (a body that
            never ends included).
        httpx.HTTPError: the transport errors of ``httpx`` as usual.
    """
    async def exchange() -> httpx.Response:
        async with client.stream(method, url, **kwargs) as response:
            kept = bytearray()
            async for chunk in response.aiter_bytes():
                if len(kept) < cap:
                    kept += chunk[:cap - len(kept)]
            return httpx.Response(response.status_code, headers=response.headers,
                                  content=bytes(kept), request=response.request)

    try:
        async with asyncio.timeout(deadline):
            return await exchange()
    except TimeoutError:
        raise httpx.ReadTimeout(f"no complete answer within {deadline:g}s") from None
