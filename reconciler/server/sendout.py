"""Large answers written to their sockets by a thread, beside the event loop.

The views of ``server.jobs`` are made in the helper process, but their bytes still
go out through the daemon: ``/v1/monitors`` of 1,000 monitors is 800 KB per answer.
Profiled under ``bench/http_load.py`` (1,000 monitors, 200 clients), the event loop
thread spent a third of its busy time inside ``send(2)`` copying those answers into
the kernel (on loopback the sender also pays the receiver's side of TCP), in steps
of up to several milliseconds during which no poll could start. ``Sender`` hands the
body of such an answer to one thread that writes it with the interpreter lock
released for each ``write(2)``: the copy runs beside the loop (on another core when
there is one) instead of in it. Headers, small answers and TLS connections (whose
bytes the loop's TLS transport must encrypt) go out the usual way.

The thread writes to a duplicate of the connection's socket (``dup(2)``), so a
connection the loop closes meanwhile can never hand its descriptor number to another
connection under the thread's feet; it writes only while the transport has nothing
queued (headers flushed first) and aiohttp writes nothing else on that connection
until the answer is complete (HTTP/1.1 answers go out in order). It is the pattern
of ``loop.sendfile`` (asyncio takes the socket from its transport for the copy),
with a thread doing the copy. Cancelling the wait (``requestTimeout``) stops the
write and closes the duplicate; the caller then drops the connection.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import selectors
import threading
import time
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

THRESHOLD = 64 * 1024
"""Bytes from which a body is written by the thread (below, the hop costs more than
the copy)."""
HEADERS_WAIT_MAX = 0.05
"""Seconds between checks, at most, that an answer's headers left (from 1 ms,
doubling): a client that does not read (pipelined requests) would otherwise wake the
loop every millisecond until ``requestTimeout``."""
CHUNK = 1 << 20
"""Bytes given to one ``write(2)`` at most (the kernel takes what its buffer holds)."""


@dataclass(eq=False, slots=True)
class _Job:
    """One body to write: the duplicate descriptor, what is left, how it ends."""

    fd: int
    body: memoryview
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]
    sent: int = 0
    cancelled: bool = False
    waiting: bool = field(default=False)
    """Registered with the thread's selector for writability."""


class Sender:
    """The thread writing large bodies (module docstring); started on first use.

    ``write_eof`` is the only entry point: it sends a prepared answer's body, by the
    thread when it is large enough and the connection is plain TCP, else by aiohttp.
    """

    def __init__(self) -> None:
        self._incoming: collections.deque[_Job] = collections.deque()
        self._jobs: set[_Job] = set()  # thread's: jobs not finished
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._stopping = False
        self.sent = 0
        """Bodies the thread wrote in full (a count; tests)."""
        self.cpu = 0.0
        """Seconds of CPU the thread has used (``time.thread_time`` of the thread, as of
        its last round): ``server.admission`` charges it to the HTTP budget."""

    async def write_eof(self, request: web.BaseRequest, response: web.StreamResponse,
                        writer: AbstractStreamWriter | None) -> None:
        """End ``response`` (prepared; ``writer`` is what its ``prepare`` returned): its
        body by the thread when eligible (``bytes`` of at least ``THRESHOLD``, plain TCP,
        sent as it is: no HEAD, compression or chunked encoding), else
        ``response.write_eof()``.

        Raises:
            ConnectionError: the client went away during the write.
        """
        transport = request.transport
        body = response.body if isinstance(response, web.Response) else None
        sock = transport.get_extra_info("socket") if transport is not None else None
        if (not isinstance(body, bytes) or len(body) < THRESHOLD or sock is None
                or transport is None or transport.get_extra_info("sslcontext") is not None
                or request.method == "HEAD" or response.compression or response.chunked
                or response.content_length != len(body)  # the body goes out as it is
                or writer is None or self._stopping):
            await response.write_eof()
            return
        writer.send_headers()
        pause = 0.001
        while transport.get_write_buffer_size():  # the headers leave before the body
            if transport.is_closing():
                raise ConnectionResetError("the client closed the connection")
            await asyncio.sleep(pause)  # backing off: a client not reading can take
            pause = min(pause * 2, HEADERS_WAIT_MAX)  # until requestTimeout
        if transport.is_closing():
            raise ConnectionResetError("the client closed the connection")
        await self._send(sock.fileno(), body)
        await web.StreamResponse.write_eof(response)  # the body is out: only the end

    async def _send(self, fd: int, body: bytes) -> None:
        if self._stopping:  # closed while the headers went out: no thread to start
            raise ConnectionResetError("the server is stopping")
        loop = asyncio.get_running_loop()
        job = _Job(os.dup(fd), memoryview(body), loop, loop.create_future())
        self._start()
        self._incoming.append(job)
        self._wake()
        try:
            await job.done
        except asyncio.CancelledError:
            job.cancelled = True
            self._wake()
            raise

    def _start(self) -> None:
        if self._thread is not None:
            return
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._run, name="monitors:http-sender",
                                        daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        if self._wake_w < 0:  # closed: its number may be another file's by now
            return
        with contextlib.suppress(BlockingIOError):  # a wake-up is pending already
            os.write(self._wake_w, b"\0")

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread (the server is stopping); bodies still being written end
        with ``ConnectionResetError``. Waits up to ``timeout`` seconds for it."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        self._wake()
        thread.join(timeout)
        if not thread.is_alive():
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            self._wake_r = self._wake_w = -1

    # -- the thread -------------------------------------------------------------

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in selector.select():
                    if key.fd == self._wake_r:
                        while True:
                            try:
                                if not os.read(self._wake_r, 4096):
                                    break
                            except BlockingIOError:
                                break
                    else:
                        self._write(selector, key.data)
                while self._incoming:
                    job = self._incoming.popleft()
                    self._jobs.add(job)
                    self._write(selector, job)
                for job in [j for j in self._jobs if j.cancelled]:
                    self._finish(selector, job, None)
                self.cpu = time.thread_time()
            while self._incoming:
                self._jobs.add(self._incoming.popleft())
            for job in list(self._jobs):
                self._finish(selector, job, ConnectionResetError("the server is stopping"))

    def _write(self, selector: selectors.BaseSelector, job: _Job) -> None:
        if job.cancelled:
            self._finish(selector, job, None)
            return
        try:
            while job.sent < len(job.body):
                job.sent += os.write(job.fd, job.body[job.sent:job.sent + CHUNK])
        except BlockingIOError:
            if not job.waiting:
                selector.register(job.fd, selectors.EVENT_WRITE, job)
                job.waiting = True
            return
        except OSError as e:  # the client went away (EPIPE, ECONNRESET)
            self._finish(selector, job, ConnectionResetError(f"writing the answer: {e}"))
            return
        self.sent += 1
        self._finish(selector, job, None)

    def _finish(self, selector: selectors.BaseSelector, job: _Job,
                error: BaseException | None) -> None:
        if job.waiting:
            selector.unregister(job.fd)
            job.waiting = False
        os.close(job.fd)
        self._jobs.discard(job)
        if not job.cancelled:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                job.loop.call_soon_threadsafe(_settle, job.done, error)


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    """On the loop: end the wait of ``Sender._send``."""
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)
