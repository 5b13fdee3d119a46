"""``poll-http``: a GET every interval; the observation is ``<status>\\n<body>``.

* One shared, pooled ``httpx.AsyncClient`` (``SourceContext.http``); requests in
  flight are capped by ``SourceContext.http_slots``.
* ``timeout`` is a deadline for the whole request, body included, so a slowly
  dripping body cannot stretch a poll past it.
* The URL and header values may use ``${ENV}``; they are expanded here, each value is
  registered with ``SourceContext.redactor`` (so an endpoint echoing it shows ``***``), and they
  are never printed (``redacted_headers`` for display; the URL is shown redacted in
  errors and ``meta.url``).
* Redirects are not followed unless ``followRedirects: true``; TLS is verified.
* DNS, connect, TLS, protocol and timeout failures are check errors whose message
  names the exception class; the body is capped at ``maxBytes`` (``truncated``).
* A URL that cannot be requested at all (unparsable, no host, a port outside
  0-65535) or a header that cannot be sent (a name that is not an RFC 9110 token,
  a value with CR/LF/NUL or outside ASCII) is a permanent check error of kind
  ``url`` or ``config`` with one line (``check_url``, ``check_headers``): retrying
  cannot help, and no foreign exception ever leaves this module for them.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from reconciler import errors, redaction
from reconciler.model import Monitor, Observation
from reconciler.sources import process

if TYPE_CHECKING:
    from reconciler.sources import SourceContext

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 section 5.6.2
REDACTED = "<redacted>"


def expand_headers(headers: Mapping[str, str], ctx: SourceContext) -> dict[str, str]:
    """Header values with ``${NAME}`` replaced from the environment (``ctx.expand``;
    each value is registered with ``ctx.redactor``).

    Raises:
        errors.SourceError: kind ``config`` naming the header and the unset variable
            (never the value).
    """
    return {name: ctx.expand(value, where=f"header {name}") for name, value in headers.items()}


def check_url(url: str, shown: str | None = None) -> httpx.URL:
    """Parse ``url`` for a GET: http(s), a host, a port in 0-65535.

    Args:
        shown: ``url`` as messages may show it (redacted; default ``url``).

    Raises:
        errors.SourceError: kind ``url``, permanent, one line naming what is wrong.
    """
    if shown is not None and shown != url:
        try:
            return check_url(url)
        except errors.SourceError as e:
            raise errors.SourceError(str(e).replace(url, shown), kind="url",
                                     permanent=True) from None
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError) as e:
        raise errors.SourceError(f"{url}: not a valid URL: {e}", kind="url",
                                 permanent=True) from None
    if parsed.scheme not in ("http", "https"):
        raise errors.SourceError(f"{url}: the scheme must be http or https", kind="url",
                                 permanent=True)
    if not parsed.host:
        raise errors.SourceError(f"{url}: no host in the URL", kind="url", permanent=True)
    if parsed.port is not None and not 0 < parsed.port <= 65535:
        raise errors.SourceError(f"{url}: port {parsed.port} is outside 1-65535", kind="url",
                                 permanent=True)
    return parsed


def check_headers(headers: Mapping[str, str]) -> None:
    """Refuse headers that cannot be sent (names are shown, values never).

    Raises:
        errors.SourceError: kind ``config``, permanent.
    """
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            raise errors.SourceError(f"header {name!r}: not a valid header name",
                                     kind="config", permanent=True)
        if any(c in value for c in "\r\n\0") or not value.isascii():
            raise errors.SourceError(
                f"header {name}: the value has a line break, NUL or non-ASCII character",
                kind="config", permanent=True)


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers for display: every value that uses ``${ENV}`` is ``<redacted>``."""
    return {k: (REDACTED if redaction.names(v) else v) for k, v in headers.items()}


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


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (``exc`` itself when not a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """GET ``source.url`` once.

    Raises:
        errors.SourceError: kind ``url`` or ``config`` (permanent: a bad URL or header;
            an unset ``${ENV}`` is not permanent), ``timeout``, ``dns``, ``connect``,
            ``tls``, ``protocol`` or ``http``.
    """
    spec = monitor.source
    target = ctx.expand(str(spec["url"]), where="url")  # ${NAME}s: sent, never shown
    url = ctx.redactor.redact(target)
    timeout = float(spec["timeout"])
    limit = int(spec["maxBytes"])
    check_url(target, url)
    headers = expand_headers(spec.get("headers") or {}, ctx)
    check_headers(headers)
    body = process.Capped(limit)
    async with ctx.http_slots:
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async with ctx.http.stream(
                    "GET", target, headers=headers,
                    follow_redirects=bool(spec.get("followRedirects")),
                    timeout=httpx.Timeout(timeout),
                ) as response:
                    async for chunk in response.aiter_bytes():
                        body.add(chunk)
                        if body.truncated:
                            break
                    status = response.status_code
                    final_url = ctx.redactor.redact(str(response.url))
                    encoding = response.encoding or "utf-8"
                    content_type = response.headers.get("content-type", "")
                    location = response.headers.get("location")
        except TimeoutError:
            raise errors.SourceError(
                f"GET {url}: no complete response within {timeout:g}s", kind="timeout"
            ) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as e:
            # ``url`` passed check_url: this came from a redirect's Location, which the
            # server may fix, so it is not permanent.
            raise errors.SourceError(f"GET {url}: {ctx.redactor.redact(str(e))}",
                                     kind="url") from None
        except (ValueError, TypeError, OverflowError, ExceptionGroup) as e:
            # What httpx/anyio let through for input they cannot use (an IDNA label, a
            # redirect to port 99999, raised as an ExceptionGroup by the connect race):
            # one line, never a traceback.
            leaf = _leaf(e)
            raise errors.SourceError(
                f"GET {url}: {type(leaf).__name__}: {ctx.redactor.redact(str(leaf))}",
                kind="url") from None
        except httpx.HTTPError as e:
            kind = _classify(e)
            detail = ctx.redactor.redact(str(e) or type(e).__name__)
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
