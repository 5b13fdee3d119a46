"""One connection pool per HTTP worker: the transport of ``SourceContext.http``.

httpcore's pool costs grow with the requests sharing it: each request and each
response close walks every connection (an idle one is also checked with a ``poll``
system call), and requests that enter it within a few loop steps of each other are
handed the same idle connection and retry. Measured on loopback against one server
(``bench/engine_scale.py --only http``): with 25 requests in flight on one pool, about
1,700 us of CPU per request, 5 passes over the pool per request; with one pool per
request in flight, about 450 us, as with 4 in flight.

So the client's transport (``PerWorker``) sends each request of a worker of
``SourceContext.http_workers`` through that worker's own pool (made on its first
request; a worker sends one request at a time, so its pool never has two waiting);
requests sent outside the workers (``device`` probes) share one pool sized to the cap.
Cookies, redirects and the rest of the client's behaviour stay the client's, shared.
All pools share one TLS context (verification on, no settings from the environment).
"""

from __future__ import annotations

import httpx

from reconciler.sources import workers as workers_mod

KEEPALIVE_PER_WORKER = 2
"""Idle connections a worker's pool keeps (a worker sends one request at a time; two
let it alternate between two servers without reconnecting)."""


class PerWorker(httpx.AsyncBaseTransport):
    """A transport sending each request through the pool of the worker sending it.

    Args:
        workers: the workers whose requests get a pool each.
        limits: the pool of requests sent outside the workers.
    """

    def __init__(self, workers: workers_mod.Workers, limits: httpx.Limits) -> None:
        self._workers = workers
        self._tls = httpx.create_ssl_context(verify=True, trust_env=False)
        self._pools: dict[int, httpx.AsyncHTTPTransport] = {}
        self._shared = self._pool(limits)

    def _pool(self, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(verify=self._tls, limits=limits, trust_env=False)

    def pool_for(self, index: int) -> httpx.AsyncHTTPTransport:
        """Worker ``index``'s pool (made on first use)."""
        pool = self._pools.get(index)
        if pool is None:
            pool = self._pools[index] = self._pool(httpx.Limits(
                max_connections=KEEPALIVE_PER_WORKER,
                max_keepalive_connections=KEEPALIVE_PER_WORKER))
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the calling worker's pool, else the shared one."""
        current = workers_mod.current()
        if current is not None and current[0] is self._workers:
            return await self.pool_for(current[1]).handle_async_request(request)
        return await self._shared.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in [*pools, self._shared]:
            await pool.aclose()
