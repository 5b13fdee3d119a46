"""Cookies kept for one poll only: the cookie jar of ``SourceContext.http``.

httpx keeps one cookie jar per client, and every HTTP poll of every monitor goes
through one shared client. With a plain jar, a cookie set by one monitor's server was
sent with every later request of any monitor to that host, and a server setting a new
cookie on each answer grew the ``Cookie`` header without bound (8 KB after 146 polls,
when servers answer 400 and every poll of that host fails).

``PollCookieJar`` is a ``http.cookiejar.CookieJar`` whose store is the one of the poll
running in the current context (``poll_cookies``, a ``contextvars`` scope around a
request): a redirect chain within one poll keeps the cookies its hops set, as a browser
session would, and nothing outlives the poll. Outside a poll (a ``device`` probe)
nothing is kept. The jar's own code (RFC 6265 domain and path matching, expiry) is the
standard library's.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.cookiejar
from collections.abc import Iterator
from typing import Any

_CURRENT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "monitors_poll_cookies", default=None)


class PollCookieJar(http.cookiejar.CookieJar):
    """A cookie jar storing into the current poll's cookies (module docstring)."""

    @property
    def _cookies(self) -> dict[str, Any]:
        store = _CURRENT.get()
        return store if store is not None else {}  # outside a poll: kept nowhere

    @_cookies.setter
    def _cookies(self, value: dict[str, Any]) -> None:
        store = _CURRENT.get()
        if store is not None:  # ``clear()`` assigns a new dict
            store.clear()
            store.update(value)


@contextlib.contextmanager
def poll_cookies() -> Iterator[None]:
    """``with poll_cookies():`` one poll's requests share cookies, and only they do."""
    token = _CURRENT.set({})
    try:
        yield
    finally:
        _CURRENT.reset(token)
