"""poll-http against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import http.server
import time
from typing import Any

import pytest

from reconciler import errors
from reconciler.model import Observation
from reconciler.sources import http
from reconciler.sources.context import SourceContext
from tests.factories import monitor
from tests.helpers import endless_server, free_port, http_server, reply, rss_bytes


def ok(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 200, f"hello auth={h.headers.get('Authorization')}".encode(),
          {"Content-Type": "text/plain; charset=utf-8"})


def fail(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 500, b"boom")


def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 302, b"", {"Location": "/ok"})


def drip(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "100")
    h.end_headers()
    for _ in range(100):
        try:
            h.wfile.write(b"x")
            h.wfile.flush()
        except OSError:
            return
        time.sleep(0.1)


def drop(h: http.server.BaseHTTPRequestHandler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", "1000")
    h.end_headers()
    h.wfile.write(b"partial")
    h.wfile.flush()
    h.connection.shutdown(2)
    h.close_connection = True


def big(h: http.server.BaseHTTPRequestHandler) -> None:
    reply(h, 200, b"z" * 300_000)


ROUTES = {"/ok": ok, "/fail": fail, "/redirect": redirect, "/drip": drip, "/drop": drop,
          "/big": big}


def get(url: str, **spec: Any) -> Observation:
    m = monitor({"type": "poll-http", "url": url, "interval": "30s", **spec})

    async def go() -> Observation:
        c = SourceContext.create()
        try:
            return await http.observe(m, c)
        finally:
            await c.aclose()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def base() -> Any:
    with http_server(ROUTES) as url:
        yield url


def test_200_status_and_body(base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_FOR_TEST", "s3cret")
    obs = get(base + "/ok", headers={"Authorization": "Bearer ${TOKEN_FOR_TEST}"})
    assert obs.text == "200\nhello auth=Bearer s3cret"
    assert obs.meta["status"] == 200 and obs.meta["truncated"] is False
    assert "s3cret" not in repr(obs.meta)


def test_unset_env_in_header_is_check_error_naming_variable(base: str) -> None:
    with pytest.raises(errors.SourceError, match="NO_SUCH_VAR_X is not set") as info:
        get(base + "/ok", headers={"Authorization": "${NO_SUCH_VAR_X}"})
    assert info.value.kind == "config"
    assert http.redacted_headers({"A": "x ${T}", "B": "plain"}) == {"A": "<redacted>",
                                                                    "B": "plain"}


def test_500_is_an_observation(base: str) -> None:
    assert get(base + "/fail").text == "500\nboom"


def test_redirect_not_followed_by_default(base: str) -> None:
    obs = get(base + "/redirect")
    assert obs.text.startswith("302\n") and obs.meta["location"] == "/ok"
    assert "redirects" not in obs.meta


def test_redirect_followed_when_asked(base: str) -> None:
    obs = get(base + "/redirect", followRedirects=True)
    assert obs.text.startswith("200\nredirect: 302 /ok\nhello")  # a hop can be matched
    assert obs.meta["url"].endswith("/ok")
    assert obs.meta["redirects"] == [{"status": 302, "location": "/ok"}]  # each hop


def test_dripping_body_cannot_stretch_past_deadline(base: str) -> None:
    started = time.monotonic()
    with pytest.raises(errors.SourceError) as info:
        get(base + "/drip", timeout="1s")
    assert info.value.kind == "timeout"
    assert time.monotonic() - started < 3


def test_dropped_connection_is_check_error_with_class(base: str) -> None:
    with pytest.raises(errors.SourceError) as info:
        get(base + "/drop")
    assert info.value.kind == "protocol"
    assert "RemoteProtocolError" in str(info.value) or "ReadError" in str(info.value)


def test_refused_port_is_connect_error() -> None:
    with pytest.raises(errors.SourceError) as info:
        get(f"http://127.0.0.1:{free_port()}/")
    assert info.value.kind == "connect" and "ConnectError" in str(info.value)


def test_body_capped(base: str) -> None:
    obs = get(base + "/big", maxBytes=1000)
    assert obs.text == "200\n" + "z" * 1000 and obs.meta["truncated"] is True


def test_dns_failure_is_classified() -> None:
    with pytest.raises(errors.SourceError) as info:
        get("http://no-such-host.invalid/", timeout="5s")
    assert info.value.kind in {"dns", "connect"}
    assert "ConnectError" in str(info.value)


QSEC, PWSEC = "q-s3cret-value", "pw-s3cret-value"


def test_url_expands_env_sends_it_and_shows_it_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    # README "Secrets": ${NAME} in a source's url is expanded (and registered), in the
    # query and in the userinfo (sent as Basic auth); meta and errors show only ***
    seen: list[tuple[str, str | None]] = []

    def echo(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append((h.requestline, h.headers.get("Authorization")))
        reply(h, 200, b"ok")

    def hop(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 302, b"", {"Location": "/echo?" + h.path.partition("?")[2]})

    monkeypatch.setenv("QSEC", QSEC)
    monkeypatch.setenv("PWSEC", PWSEC)
    with http_server({"/echo": echo, "/hop": hop}) as url:
        host = url.removeprefix("http://")
        assert get(url + "/echo?q=${QSEC}").text == "200\nok"
        get(f"http://user:${{PWSEC}}@{host}/echo")
        obs = get(url + "/hop?q=${QSEC}", followRedirects=True)
    assert seen[0][0] == f"GET /echo?q={QSEC} HTTP/1.1"
    assert seen[1][1] == "Basic " + base64.b64encode(f"user:{PWSEC}".encode()).decode()
    assert seen[2][0] == f"GET /echo?q={QSEC} HTTP/1.1"
    assert obs.meta["url"].endswith("/echo?q=***") and QSEC not in repr(obs.meta)
    with pytest.raises(errors.SourceError) as info:
        get(f"http://user:${{PWSEC}}@127.0.0.1:{free_port()}/?q=${{QSEC}}")
    assert info.value.kind == "connect"
    assert QSEC not in str(info.value) and PWSEC not in str(info.value)
    assert "q=***" in str(info.value)


def test_unset_env_in_url_is_check_error_naming_variable() -> None:
    with pytest.raises(errors.SourceError, match="url: environment variable "
                       "NO_SUCH_VAR_U is not set") as info:
        get("http://127.0.0.1:9/?q=${NO_SUCH_VAR_U}")
    assert info.value.kind == "config"


def test_endless_body_is_capped_at_max_bytes_in_bounded_time_and_memory() -> None:
    before = rss_bytes()
    started = time.monotonic()
    with endless_server() as url:
        obs = get(url + "/", maxBytes=100_000, timeout="5s")
    assert obs.meta["truncated"] is True and len(obs.text) == len("200\n") + 100_000
    assert time.monotonic() - started < 5
    assert rss_bytes() - before < 64 << 20


def test_polls_reuse_the_parsed_url_until_an_expansion_changes(
        base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The URL is parsed and checked once per monitor, not per poll (issue 17); a
    # ${NAME} whose value changes is a new URL, parsed again.
    parsed: list[str] = []
    real = http.check_url

    def counting(url: str, shown: str | None = None) -> Any:
        if shown is not None:  # not check_url's own inner call
            parsed.append(url)
        return real(url, shown)

    monkeypatch.setattr(http, "check_url", counting)
    monkeypatch.setenv("OK_PATH_FOR_TEST", "ok")
    m = monitor({"type": "poll-http", "url": base + "/${OK_PATH_FOR_TEST}", "interval": "30s"})

    async def go() -> list[Observation]:
        c = SourceContext.create()
        try:
            out = [await http.observe(m, c) for _ in range(3)]
            monkeypatch.setenv("OK_PATH_FOR_TEST", "fail")
            out.append(await http.observe(m, c))
            return out
        finally:
            await c.aclose()

    observations = asyncio.run(go())
    assert [o.meta["status"] for o in observations] == [200, 200, 200, 500]
    assert parsed == [base + "/ok", base + "/fail"]


def test_body_decoded_with_the_declared_charset_else_utf8() -> None:
    def latin(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200, "café".encode("latin-1"), {"Content-Type": "text/plain; Charset=ISO-8859-1"})

    def plain(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200, "café".encode(), {"Content-Type": "text/plain"})

    with http_server({"/latin": latin, "/plain": plain}) as url:
        assert get(url + "/latin").text == "200\ncafé"
        assert get(url + "/plain").text == "200\ncafé"


def test_cookies_last_one_request_and_its_redirects() -> None:
    """A cookie set by a server is sent along that request's redirects (a login hop)
    and never with a later poll, of this monitor or another: a server setting a new
    cookie on each answer grew one shared jar until every poll of its host failed."""
    seen: list[str] = []
    count = {"n": 0}

    def setter(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.headers.get("Cookie", ""))
        count["n"] += 1
        reply(h, 200, b"ok", {"Set-Cookie": f"c{count['n']}={'x' * 100}; Path=/"})

    def login(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 302, b"", {"Set-Cookie": "session=abc; Path=/", "Location": "/page"})

    def page(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200 if "session=abc" in h.headers.get("Cookie", "") else 403, b"page")

    with http_server({"/set": setter, "/login": login, "/page": page}) as url:
        async def go() -> tuple[list[int], int]:
            c = SourceContext.create()
            try:
                a = monitor({"type": "poll-http", "url": f"{url}/set", "interval": "30s"})
                b = monitor({"type": "poll-http", "url": f"{url}/set", "interval": "30s"},
                            name="other")
                statuses = [(await http.observe(m, c)).meta["status"]
                            for m in (a, a, b, a)]
                chain = monitor({"type": "poll-http", "url": f"{url}/login",
                                 "interval": "30s", "followRedirects": True}, name="chain")
                return statuses, (await http.observe(chain, c)).meta["status"]
            finally:
                await c.aclose()

        statuses, chained = asyncio.run(go())
    assert statuses == [200, 200, 200, 200]
    assert seen == ["", "", "", ""]  # no poll sent an earlier poll's cookie
    assert chained == 200  # the redirect hop's cookie reached the page
