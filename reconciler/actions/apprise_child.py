"""One Apprise send in a child process, so that it can be ended at its deadline.

Apprise reads a channel's whole answer into memory (``requests``) with a timeout per
read, and sends from its own thread pool, which a thread in our process cannot stop:
an endpoint whose answer never ends kept a daemon thread reading (gigabytes a minute)
and kept ``monitors channels test`` from exiting (``concurrent.futures`` joins the
pool at exit). Here each send runs as ``python -m reconciler.actions.apprise_child``:
the request (URL, title, body) goes in on stdin as JSON (never in argv: the URL may
hold a secret), the answer comes back on stdout as JSON, and at the deadline the child
is killed, which ends its reading and gives its memory back. The cost is a Python
start and Apprise's import per send (about 0.4 s; notifications are rate-limited).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass

CHILD = [sys.executable, "-m", "reconciler.actions.apprise_child"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What Apprise said about one send.

    Attributes:
        added: Apprise accepted the URL.
        ok: the send succeeded.
        said: Apprise's warnings and errors (may quote the URL: redact before showing).
    """

    added: bool
    ok: bool
    said: tuple[str, ...]


def _request(url: str, title: str, body: str) -> bytes:
    return json.dumps({"url": url, "title": title, "body": body}).encode()


def _answer(out: bytes) -> Answer:
    try:
        doc = json.loads(out)
        return Answer(bool(doc["added"]), bool(doc["ok"]), tuple(map(str, doc["said"])))
    except (ValueError, KeyError, TypeError):
        return Answer(True, False, ("the Apprise child process ended without an answer",))


def send(url: str, title: str, body: str, *, timeout: float) -> Answer | None:
    """Send one message through Apprise URL ``url`` within ``timeout`` seconds.

    Returns:
        The ``Answer``, or None when none came within ``timeout`` (the child is killed).
    """
    with subprocess.Popen(CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(_request(url, title, body), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
    return _answer(out)


async def send_async(url: str, title: str, body: str, *, timeout: float) -> Answer | None:
    """``send`` for the event loop (the child is killed on timeout and on cancellation)."""
    proc = await asyncio.create_subprocess_exec(
        *CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(_request(url, title, body)), timeout)
    except TimeoutError:
        return None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    return _answer(out)


def _main() -> None:
    """The child: one request on stdin, one answer on stdout, then exit at once (not
    waiting for Apprise's pool)."""
    from reconciler.actions.channels import _apprise_log

    req = json.loads(sys.stdin.buffer.read())
    added = ok = False
    with _apprise_log() as said:
        try:
            import apprise

            sender = apprise.Apprise()
            added = bool(sender.add(req["url"]))
            ok = added and bool(sender.notify(body=req["body"], title=req["title"]))
        except Exception as e:  # a plugin bug is this channel's failure
            said.append(f"{type(e).__name__}: {e}")
    sys.stdout.write(json.dumps({"added": added, "ok": ok, "said": said}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    _main()
