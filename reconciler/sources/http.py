"""``poll-http``: a GET every interval; the observation is ``<status>\\n<body>``.

* One shared, pooled ``httpx.AsyncClient`` (``SourceContext.http``); requests in
  flight are capped by ``SourceContext.http_slots``.
* ``timeout`` is a deadline for the whole request, body included, so a slowly
  dripping body cannot stretch a poll past it.
* Header values may use ``${ENV}``; they are expanded here and never printed
  (``redacted_headers`` for display).
* Redirects are not followed unless ``followRedirects: true``; TLS is verified.
* DNS, connect, TLS, protocol and timeout failures are check errors whose message
  names the exception class; the body is capped at ``maxBytes`` (``truncated``).
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from reconciler import errors
from reconciler.model import Monitor, Observation
from reconciler.sources import process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
REDACTED = "<redacted>"


def expand_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header values with ``${NAME}`` replaced from the environment.

    Raises:
        errors.SourceError: kind ``config`` naming the header and the unset variable
            (never the value).
    """
    out: dict[str, str] = {}
    for name, value in headers.items():
        def sub(m: re.Match[str], header: str = name) -> str:
            var = m.group(1)
            if var not in os.environ:
                raise errors.SourceError(
                    f"header {header}: environment variable {var} is not set", kind="config"
                )
            return os.environ[var]

        out[name] = _ENV.sub(sub, value)
    return out


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers for display: every value that uses ``${ENV}`` is ``<redacted>``."""
    return {k: (REDACTED if _ENV.search(v) else v) for k, v in headers.items()}


def _classify(exc: BaseException) -> str:
    """``dns``, ``tls``, ``connect``, ``timeout``, ``protocol`` or ``http`` for an httpx error."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    text = " ".join(str(c) for c in chain).lower()
    if any(isinstance(c, ssl.SSLError) for c in chain) or "certificate" in text or "ssl" in text:
        return "tls"
    if isinstance(exc, httpx.ConnectError):
        if "name or service not known" in text or "nodename nor servname" in text or \
                "temporary failure in name resolution" in text or "no address" in text:
            return "dns"
        return "connect"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return "protocol"
    return "http"


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """GET ``source.url`` once.

    Raises:
        errors.SourceError: kind ``config`` (unset ``${ENV}``), ``timeout``, ``dns``,
            ``connect``, ``tls``, ``protocol`` or ``http``.
    """
    spec = monitor.source
    url = str(spec["url"])
    timeout = float(spec["timeout"])
    limit = int(spec["maxBytes"])
    headers = expand_headers(spec.get("headers") or {})
    body = process.Capped(limit)
    async with ctx.http_slots:
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with ctx.http.stream(
                    "GET", url, headers=headers,
                    follow_redirects=bool(spec.get("followRedirects")),
                    timeout=httpx.Timeout(timeout),
                ) as response:
                    async for chunk in response.aiter_bytes():
                        body.add(chunk)
                        if body.truncated:
                            break
                    status = response.status_code
                    final_url = str(response.url)
                    encoding = response.encoding or "utf-8"
                    content_type = response.headers.get("content-type", "")
                    location = response.headers.get("location")
        except TimeoutError:
            raise errors.SourceError(
                f"GET {url}: no complete response within {timeout:g}s", kind="timeout"
            ) from None
        except httpx.HTTPError as e:
            kind = _classify(e)
            detail = str(e) or type(e).__name__
            raise errors.SourceError(
                f"GET {url}: {type(e).__name__}: {detail}", kind=kind
            ) from e
    duration = time.monotonic() - started
    try:
        text = body.data().decode(encoding, errors="replace")
    except LookupError:
        text = process.decode(body.data())
    meta: dict[str, object] = {
        "status": status,
        "duration": round(duration, 4),
        "truncated": body.truncated,
        "contentType": content_type,
    }
    if final_url != url:
        meta["url"] = final_url
    if location and 300 <= status < 400:
        meta["location"] = location
    return Observation(f"{status}\n{text}", meta)
