"""The source edge refuses and bounds: user input never escapes as a foreign exception,
shell start failures are check errors, polls leave no process behind, endless output
is an observation."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler import errors
from reconciler.fleet import Device, Fleet
from reconciler.model import DeviceName, Monitor
from reconciler.sources import registry as source_types
from reconciler.sources.context import SourceContext
from tests.factories import monitor
from tests.sources.test_file_pid_device import observe
from tests.sources.test_process import observe_poll, wait_dead


def source_error(m: Monitor, **ctx_args: Any) -> errors.SourceError:
    with pytest.raises(errors.SourceError) as info:
        observe(m, **ctx_args)
    return info.value


# -- 2. bad URLs and other user input ------------------------------------------------


@pytest.mark.parametrize("url, fragment", [
    ("http://127.0.0.1:99999/", "port 99999 is outside 1-65535"),
    ("http://[::1", "not a valid URL"),
    ("http://127.0.0.1:0/", "port 0"),
    ("http:///path", "no host"),
])
def test_bad_url_is_a_permanent_url_error(url: str, fragment: str) -> None:
    e = source_error(monitor({"type": "poll-http", "url": url, "interval": "30s"}))
    assert e.kind == "url" and e.permanent
    assert fragment in str(e) and "\n" not in str(e)


@pytest.mark.parametrize("headers, fragment", [
    ({"X-Ok": "a\nInjected: 1"}, "line break"),
    ({"X-Ok": "caf\u00e9"}, "non-ASCII"),
    ({"Bad Name": "a"}, "not a valid header name"),
])
def test_unsendable_header_is_a_permanent_config_error(headers: dict[str, str],
                                                       fragment: str) -> None:
    e = source_error(monitor({"type": "poll-http", "url": "http://127.0.0.1:9/",
                              "interval": "30s", "headers": headers}))
    assert e.kind == "config" and e.permanent and fragment in str(e)


@pytest.mark.parametrize("spec", [
    {"env": {"A": "x\x00y"}},
    {"env": {"A=B": "x"}},
])
def test_env_the_os_refuses_is_a_spawn_error(spec: dict[str, Any]) -> None:
    with pytest.raises(errors.SourceError) as info:
        observe_poll(["true"], **spec)
    assert info.value.kind == "spawn" and info.value.permanent


def test_cwd_that_is_a_file_is_a_spawn_error(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(errors.SourceError) as info:
        observe_poll(["true"], cwd=str(f))
    assert info.value.kind == "spawn" and "Not a directory" in str(info.value)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    e = source_error(monitor({"type": "file", "path": str(fifo), "interval": "30s",
                              "timeout": "20s"}))
    assert e.kind == "unreadable" and "is a FIFO" in str(e)
    assert time.monotonic() - started < 10  # it used to block a worker thread forever


def test_socket_and_device_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        e = source_error(monitor({"type": "file", "path": str(path), "interval": "30s"}))
    assert e.kind == "unreadable" and "is a socket" in str(e)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    e2 = source_error(monitor({"type": "file", "path": "/dev/null", "interval": "30s"}))
    assert "is a character device" in str(e2)


def test_nul_in_file_path_is_a_config_error() -> None:
    e = source_error(monitor({"type": "file", "path": "/tmp/a\x00b", "interval": "30s"}))
    assert e.kind == "config" and e.permanent


@pytest.mark.parametrize("pid", [0, -1, 2**40])
def test_pid_out_of_range_is_a_config_error(pid: int) -> None:
    m = monitor({"type": "pid", "pid": 1, "interval": "30s"})
    # past the schema, as a hand-built Monitor could be
    m = dataclasses.replace(m, source=dataclasses.replace(m.source, pid=pid))
    e = source_error(m)
    assert e.kind == "config" and e.permanent and "outside" in str(e)


def test_device_with_a_port_out_of_range_is_a_config_error() -> None:
    fleet = Fleet((Device(DeviceName("far"), "127.0.0.1:99999"),), exists=True)
    e = source_error(monitor({"type": "device", "device": "far", "interval": "30s"}),
                     fleet=fleet)
    assert e.kind == "config" and e.permanent and "outside 1-65535" in str(e)


# -- 3. shell start failures ---------------------------------------------------------


def test_shell_command_not_found_is_a_spawn_error_with_stderr() -> None:
    with pytest.raises(errors.SourceError) as info:
        observe_poll("does-not-exist-xyz a")
    e = info.value
    assert e.kind == "spawn" and not e.permanent
    assert "127" in str(e) and "not found" in str(e) and "does-not-exist-xyz" in str(e)


def test_shell_command_not_executable_is_a_spawn_error(tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    with pytest.raises(errors.SourceError) as info:
        observe_poll(str(script))
    assert info.value.kind == "spawn" and "126" in str(info.value)


def test_other_exit_codes_and_argv_127_stay_observations() -> None:
    assert observe_poll("exit 1").meta["exitCode"] == 1
    assert observe_poll("exit 2").meta["exitCode"] == 2
    assert observe_poll(["sh", "-c", "exit 127"]).meta["exitCode"] == 127


# -- 4. no orphans -------------------------------------------------------------------


def test_background_process_of_a_poll_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg"
    try:
        obs = observe_poll(f"sleep 300 & echo $! > {pidfile}; echo started", timeout="20s")
        assert obs.text == "started\n"
        assert wait_dead(int(pidfile.read_text())), "the background sleep outlived the poll"
    finally:
        with contextlib.suppress(Exception):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_grandchild_holding_stdout_is_killed_and_poll_returns_promptly(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg"
    started = time.monotonic()
    try:
        obs = observe_poll(f"echo hi; (sleep 30; echo late) & echo $! > {pidfile}",
                           timeout="20s")
        assert obs.text == "hi\n" and time.monotonic() - started < 5
        assert wait_dead(int(pidfile.read_text()))
    finally:
        with contextlib.suppress(Exception):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_cancelled_poll_kills_its_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg"
    m = monitor({"type": "poll", "command": f"sleep 300 & echo $! > {pidfile}; wait",
                 "interval": "30s", "timeout": "60s"})

    async def go() -> None:
        c = SourceContext.create()
        task = asyncio.ensure_future(source_types.observe(m, c))
        deadline = time.monotonic() + 10
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await c.aclose()

    try:
        asyncio.run(go())
        assert wait_dead(int(pidfile.read_text()))
    finally:
        with contextlib.suppress(Exception):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


# -- 5. endless output ---------------------------------------------------------------


def test_endless_output_is_a_truncated_observation_not_a_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    obs = observe_poll(["yes"], timeout="20s")
    assert len(obs.text) == 1024 * 1024 and obs.text.startswith("y\ny\n")
    assert obs.meta["truncated"] is True
    assert time.monotonic() - started < 15  # far from the 20 s timeout


def test_endless_output_process_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "yes"
    obs = observe_poll(["sh", "-c", f"echo $$ > {pidfile}; exec yes"], maxBytes=4096,
                       timeout="20s")
    assert len(obs.text) == 4096 and obs.meta["truncated"] is True
    assert wait_dead(int(pidfile.read_text()))


def test_short_overflow_that_exits_keeps_its_exit_code() -> None:
    obs = observe_poll([sys.executable, "-c", "import sys; sys.stdout.write('y' * 300000)"],
                       maxBytes=1000, timeout="20s")
    assert obs.meta["truncated"] is True and obs.meta["exitCode"] == 0


def test_redirect_to_a_bad_port_is_a_transient_url_error() -> None:
    from tests.helpers import http_server, reply

    def bad(h: Any) -> None:
        reply(h, 302, b"", {"Location": "http://127.0.0.1:99999/x"})

    with http_server({"/bad": bad}) as base:
        e = source_error(monitor({"type": "poll-http", "url": f"{base}/bad", "interval": "30s",
                                  "followRedirects": True}))
    assert e.kind == "url" and not e.permanent and "\n" not in str(e)
