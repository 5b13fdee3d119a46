"""``poll-http``: a GET every interval; the observation is ``<status>\\n<body>`` (with
followed redirects, ``<status>\\n`` then a ``redirect: <status> <location>`` line per hop,
then the body).

* One shared ``httpx.AsyncClient`` (``SourceContext.http``); requests in flight are
  capped by ``SourceContext.http_workers``, which run them (``fetch``), each through
  its own connection pool (``sources.httppools``).
* ``timeout`` is a deadline for the whole request, body included, so a slowly
  dripping body cannot stretch a poll past it.
* The URL and header values may use ``${ENV}``; they are expanded here, each value is
  registered with ``SourceContext.redactor`` (so an endpoint echoing it shows ``***``), and they
  are never printed (``redacted_headers`` for display; the URL is shown redacted in
  errors and ``meta.url``).
* Redirects are not followed unless ``followRedirects: true``; then each hop's status
  and ``Location`` are in ``meta.redirects`` (``[{"status": 302, "location": ...}]``)
  and in the text after the status line (``redirect: 302 /maintenance``), so a redirect
  to a status page that answers 200 can still be matched. TLS is verified.
* DNS, connect, TLS, protocol and timeout failures are check errors whose message
  names the exception class; the body is capped at ``maxBytes`` (``truncated``).
* A URL that cannot be requested at all (unparsable, no host, a port outside
  0-65535) or a header that cannot be sent (a name that is not an RFC 9110 token,
  a value with CR/LF/NUL or outside ASCII) is a permanent check error of kind
  ``url`` or ``config`` with one line (``check_url``, ``check_headers``): retrying
  cannot help, and no foreign exception ever leaves this module for them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from reconciler import durations, errors, redaction
from reconciler.addflags import AddFlag
from reconciler.findings import Finding
from reconciler.model import Monitor, Observation
from reconciler.sources import fields
from reconciler.sources import select as select_mod
from reconciler.sources.fields import DEFAULT_MAX_BYTES, doc

if TYPE_CHECKING:
    import httpx

    from reconciler.sources.context import SourceContext
    from reconciler.sources.process import Capped

DEFAULT_TIMEOUT = 10.0
ON_ERROR = "observe"
"""The default ``condition.onError``: an outage of the watched thing is its event."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSpec:
    """A ``poll-http`` source: a GET of ``url`` every ``interval`` seconds."""

    TYPE: ClassVar[str] = "poll-http"
    KEYS: ClassVar[tuple[str, ...]] = (
        "type", "url", "interval", "timeout", "headers", "followRedirects", "maxBytes",
        "select")
    """The key order of a written ``source`` mapping (``config.writer``)."""

    url: str = doc("The http:// or https:// URL to GET.", "https://example.com/health")
    interval: float = doc("How often to GET the URL (500ms..7d).", "1m")
    timeout: float = doc("Deadline for the whole request, body included; a check error.",
                         "5s", default=DEFAULT_TIMEOUT)
    headers: Mapping[str, str] = doc(
        "Request headers; values may use ${NAME} (never printed).",
        {"Authorization": "Bearer ${API_TOKEN}"}, default_factory=dict)
    follow_redirects: bool = doc("Follow redirects (off: a 3xx is the observation).",
                                 True, default=False)
    max_bytes: int = doc("Body cap in bytes (default 1 MiB); past it meta.truncated is true.",
                         65536, default=DEFAULT_MAX_BYTES)
    select: str | None = doc(select_mod.DESCRIPTION.format(what="body (the status line "
                                                           "stays first)"),
                             select_mod.EXAMPLE, default=None, optional=True)

    def to_json(self) -> dict[str, Any]:
        """The normalized mapping (the fingerprint's input)."""
        return fields.to_json(self)

    def describe(self) -> str:
        """``poll-http: https://example.com/health every 1m``."""
        return fields.describe(self.TYPE, self.url, self.interval)


Spec = HttpSpec


def normalize(raw: Mapping[str, Any]) -> HttpSpec:
    """The spec of a schema-valid ``source`` mapping.

    Raises:
        ValueError: a duration does not parse.
    """
    return HttpSpec(
        url=raw["url"],
        interval=durations.parse(raw["interval"]),
        timeout=fields.dur(raw.get("timeout"), DEFAULT_TIMEOUT),
        headers=fields.strings(raw.get("headers")),
        follow_redirects=bool(raw.get("followRedirects", False)),
        max_bytes=int(raw.get("maxBytes", DEFAULT_MAX_BYTES)),
        select=raw.get("select"),
    )


def check(raw: Mapping[str, Any]) -> list[Finding]:
    """``select`` compiles (``sources.select.check``); durations and the URL are
    checked by all."""
    return select_mod.check(raw)


ADD = AddFlag("--poll-http", "URL INTERVAL", "GET URL every INTERVAL.", nargs=2)
"""``monitors add --poll-http URL INTERVAL``."""


def from_flag(value: tuple[str, str], *, interval: str | None, force: bool) -> dict[str, Any]:
    """The ``source`` mapping for ``--poll-http URL INTERVAL``.

    Raises:
        errors.UsageError: not an http(s) URL, or a bad interval.
    """
    url = value[0]
    if not re.match(r"^https?://", url):
        raise errors.UsageError(f"--poll-http: expected an http:// or https:// URL, "
                                f"got {url!r}")
    return {"type": HttpSpec.TYPE, "url": url,
            "interval": fields.interval_flag(value[1], "--poll-http")}

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
    import httpx

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
    import ssl

    import httpx

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


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a poll of one URL needs, made once (``prepare``) and reused by every poll.

    Attributes:
        url: the parsed URL (``${NAME}``s expanded).
        headers: the expanded headers.
        target: the URL as written, ``${NAME}``s expanded (redact before showing it:
            secrets registered later count too).
        normalized: the parsed URL's text when it differs from ``target`` (the
            ``meta.url`` of a response from ``url`` itself), else None.
    """

    url: httpx.URL
    headers: dict[str, str]
    target: str
    normalized: str | None


PREPARED_MAX = 100_000
"""Prepared requests a source context keeps (one per distinct URL and headers)."""


def prepare(spec: HttpSpec, ctx: SourceContext) -> Prepared:
    """The ``Prepared`` request of ``spec``: ``${NAME}``s are expanded on every call (a
    variable may change, and each value is registered with the redactor), the URL is
    parsed and checked only the first time that expansion is seen.

    Raises:
        errors.SourceError: kind ``url`` or ``config`` (see ``observe``).
    """
    target = ctx.expand(spec.url, where="url") if "$" in spec.url else spec.url
    headers = expand_headers(spec.headers, ctx) if spec.headers else {}
    key = (target, tuple(headers.items())) if headers else target
    cache: dict[Any, Prepared] = ctx.prepared.setdefault(HttpSpec.TYPE, {})
    found = cache.get(key)
    if found is None:
        parsed = check_url(target, ctx.redactor.redact(target))  # ${NAME}s: never shown
        check_headers(headers)
        text = str(parsed)
        found = Prepared(parsed, headers, target, text if text != target else None)
        if len(cache) >= PREPARED_MAX:
            cache.clear()
        cache[key] = found
    return found


@dataclass(slots=True)
class Fetched:
    """What ``fetch`` read of one response (the rest of the poll happens in ``observe``).

    Attributes:
        status: the (last) response's status code.
        body: the body, at most ``maxBytes`` of it (``truncated``).
        duration: seconds from sending the request to the end of the body.
        content_type: the ``Content-Type`` header ("" when absent).
        encoding: the charset to decode the body with.
        location: the ``Location`` header, or None.
        final: the URL of the response when a redirect was followed (not redacted).
        redirects: ``(status, Location)`` of each followed hop (not redacted).
    """

    status: int
    body: Capped
    duration: float
    content_type: str
    encoding: str
    location: str | None
    final: str | None
    redirects: list[tuple[int, str]]


async def fetch(ctx: SourceContext, request: Prepared, spec: HttpSpec, url: str) -> Fetched:
    """GET ``request`` with the shared client, reading the body up to ``spec.max_bytes``,
    all within ``spec.timeout`` (run in one of ``ctx.http_workers``).

    Args:
        url: the URL as messages show it (redacted).

    Raises:
        errors.SourceError: see ``observe``.
    """
    import asyncio

    import httpx

    from reconciler.sources import cookiejar, process

    timeout = spec.timeout
    body = process.Capped(spec.max_bytes)
    started = time.monotonic()
    try:
        # The one deadline of the request, body included (the client sets no
        # per-phase timeouts of its own: ``SourceContext.http``).
        async with asyncio.timeout(timeout):
            client = ctx.http
            # ``client.stream`` without its context-manager layer (the same calls); the
            # cookies set along its redirects are this request's only (``cookiejar``)
            with cookiejar.poll_cookies():
                response = await client.send(
                    client.build_request("GET", request.url, headers=request.headers),
                    stream=True, follow_redirects=spec.follow_redirects)
            try:
                async for chunk in response.aiter_bytes():
                    body.add(chunk)
                    if body.truncated:
                        break
            finally:
                await response.aclose()
            headers = response.headers
            content_type = headers.get("content-type", "")
            history = response.history
            return Fetched(
                response.status_code, body, time.monotonic() - started, content_type,
                # httpx parses a charset with the email package (costly per poll);
                # without one its answer is the client's default, UTF-8.
                (response.encoding or "utf-8")
                if "charset" in content_type.lower() else "utf-8",
                headers.get("location"),
                # No redirect followed: the response is from the URL as parsed.
                str(response.url) if history else request.normalized,
                [(hop.status_code, hop.headers.get("location", "")) for hop in history])
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


async def observe(monitor: Monitor, ctx: SourceContext) -> Observation:
    """GET ``source.url`` once: the request runs in one of ``ctx.http_workers`` (the
    in-flight cap), the observation is made here.

    Raises:
        errors.SourceError: kind ``url`` or ``config`` (permanent: a bad URL or header;
            an unset ``${ENV}`` is not permanent), ``timeout``, ``dns``, ``connect``,
            ``tls``, ``protocol`` or ``http``.
    """
    from reconciler.sources import process

    spec = monitor.source
    assert isinstance(spec, HttpSpec)
    request = prepare(spec, ctx)
    redact = ctx.redactor.redact
    url = redact(request.target)
    got = await ctx.http_workers.run(fetch, ctx, request, spec, url)
    status, body = got.status, got.body
    data = body.data()
    try:
        text = data.decode(got.encoding, errors="replace")
    except LookupError:
        text = process.decode(data)
    meta: dict[str, object] = {
        "status": status,
        "duration": round(got.duration, 4),
        "truncated": body.truncated,
        "contentType": got.content_type,
    }
    if got.final is not None:
        final_url = redact(got.final)
        if final_url != url:
            meta["url"] = final_url
    if got.location and 300 <= status < 400:
        meta["location"] = got.location
    head = f"{status}\n"
    if got.redirects:
        redirects = [{"status": hop, "location": redact(location)}
                     for hop, location in got.redirects]
        meta["redirects"] = redirects
        # in the text too, so a condition can match a hop (a redirect to a status page
        # that answers 200 is still seen): one ``redirect: <status> <location>`` line each
        head += "".join(f"redirect: {hop['status']} {hop['location']}\n" for hop in redirects)
    if spec.select is not None:
        text = select_mod.apply(spec.select, text)
    return Observation(head + text, meta)
