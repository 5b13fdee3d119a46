"""file, pid, device and push sources against real files, processes and sockets."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler import errors, processes
from reconciler.fleet import Device, Fleet
from reconciler.model import DeviceName, Monitor, Observation
from reconciler.sources import registry as source_types
from reconciler.sources.context import SourceContext
from reconciler.state import store as store_mod
from tests.factories import monitor
from tests.helpers import free_port


def observe(m: Monitor, **ctx_args: Any) -> Observation:
    async def go() -> Observation:
        c = SourceContext.create(**ctx_args)
        try:
            return await source_types.observe(m, c)
        finally:
            await c.aclose()

    return asyncio.run(go())


def file_monitor(path: Path, **spec: Any) -> Monitor:
    return monitor({"type": "file", "path": str(path), **spec})


def test_file_content_mtime_and_atomic_replace(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("one")
    first = observe(file_monitor(f))
    assert first.text == "one" and first.meta["mtime"] == f.stat().st_mtime
    tmp = tmp_path / "f.tmp"
    tmp.write_text("two")
    os.replace(tmp, f)
    assert observe(file_monitor(f)).text == "two"


def test_file_deleted_is_missing_observation(tmp_path: Path) -> None:
    f = tmp_path / "gone"
    f.write_text("x")
    f.unlink()
    obs = observe(file_monitor(f))
    assert obs.text == "missing" and obs.meta == {"exists": False}


def test_directory_sorted_listing(tmp_path: Path) -> None:
    for name in ("b.txt", "a.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    assert observe(file_monitor(tmp_path)).text == "a.txt\nb.txt\nsub/"


def test_file_capped_and_utf8_replaced(tmp_path: Path) -> None:
    f = tmp_path / "bin"
    f.write_bytes(b"\xff" + b"a" * 100)
    obs = observe(file_monitor(f, maxBytes=10))
    assert obs.text == "\ufffd" + "a" * 9 and obs.meta["truncated"] is True


def test_unreadable_file_is_check_error(tmp_path: Path) -> None:
    f = tmp_path / "secret"
    f.write_text("x")
    f.chmod(0)
    if os.geteuid() == 0:  # root reads mode-0 files; /proc/self/mem fails to read (EIO)
        f = Path("/proc/self/mem")
    with pytest.raises(errors.SourceError) as info:
        observe(file_monitor(f))
    assert info.value.kind == "unreadable"


def test_pid_running_then_exited_with_marker(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    m = monitor({"type": "pid", "pid": proc.pid}, name="p")
    try:
        assert observe(m, store=store).text == "running"
        assert store.pid_marker("p") == {**store.pid_marker("p"), "pid": proc.pid}  # type: ignore[dict-item]
    finally:
        proc.kill()
        proc.wait()
    assert observe(m, store=store).text == "exited"


def test_pid_reused_by_another_process_reads_as_exited(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    m = monitor({"type": "pid", "pid": proc.pid}, name="p")
    try:
        assert observe(m, store=store).text == "running"
        marker = store.pid_marker("p")
        assert marker is not None and marker["startTime"] == processes.start_time(proc.pid)
        assert observe(m, store=store).text == "running"
        # The pid now names a process that started at another time: not the one watched.
        store.set_pid_marker("p", proc.pid, time.time(), start_time=marker["startTime"] - 1)
        obs = observe(m, store=store)
        assert obs.text == "exited" and obs.meta == {"pid": proc.pid, "reused": True}
    finally:
        proc.kill()
        proc.wait()


def test_pid_marker_without_start_time_gets_one(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    store.set_pid_marker("self", os.getpid(), time.time())  # written by an older version
    m = monitor({"type": "pid", "pid": os.getpid()}, name="self")
    assert observe(m, store=store).text == "running"
    marker = store.pid_marker("self")
    assert marker is not None and marker["startTime"] == processes.start_time(os.getpid())


def test_pid_dead_refused_unless_forced(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    proc = subprocess.Popen(["true"])
    proc.wait()
    m = monitor({"type": "pid", "pid": proc.pid}, name="p")
    with pytest.raises(errors.SourceError) as info:
        observe(m, store=store)
    assert info.value.permanent and "force" in str(info.value)
    forced = monitor({"type": "pid", "pid": proc.pid, "force": True}, name="p")
    assert observe(forced, store=store).text == "notyetspawned"
    assert observe(forced, store=store).text == "notyetspawned"  # never "exited" unseen


def test_pid_zombie_counts_as_exited(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    m = monitor({"type": "pid", "pid": proc.pid}, name="z")
    assert observe(m, store=store).text == "running"
    assert proc.stdin is not None
    proc.stdin.close()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert observe(m, store=store).text == "exited"
    finally:
        proc.wait()


def test_pid_dry_run_writes_no_marker(tmp_path: Path) -> None:
    store = store_mod.Store(tmp_path / "st")
    m = monitor({"type": "pid", "pid": os.getpid()}, name="self")
    assert observe(m, store=store, dry_run=True).text == "running"
    assert not (tmp_path / "st").exists()


def test_device_reachable_unreachable_and_unknown() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    fleet = Fleet((Device(DeviceName("up"), f"127.0.0.1:{port}"),
                   Device(DeviceName("down"), f"127.0.0.1:{free_port()}"),
                   Device(DeviceName("noaddr"))), exists=True)
    try:
        up = observe(monitor({"type": "device", "device": "up"}), fleet=fleet)
        assert up.text == "reachable\nheadroom: unknown"
        down = observe(monitor({"type": "device", "device": "down"}), fleet=fleet)
        assert down.text.startswith("unreachable") and "ConnectionRefused" in down.meta["error"]
    finally:
        listener.close()
    with pytest.raises(errors.SourceError, match="not in the fleet"):
        observe(monitor({"type": "device", "device": "nope"}), fleet=fleet)
    with pytest.raises(errors.SourceError, match="no address"):
        observe(monitor({"type": "device", "device": "noaddr"}), fleet=fleet)


def test_device_headroom_for_this_device() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    fleet = Fleet((Device(DeviceName("me"), f"127.0.0.1:{listener.getsockname()[1]}"),),
                  exists=True)

    async def go() -> Observation:
        c = SourceContext.create(fleet=fleet)
        c.device = "me"
        try:
            return await source_types.observe(monitor({"type": "device", "device": "me"}), c)
        finally:
            await c.aclose()

    try:
        obs = asyncio.run(go())
    finally:
        listener.close()
    assert obs.text.split("\n")[1] in {"headroom: ok", "headroom: low", "headroom: critical"}
    assert "diskFree" in obs.meta and "loadPerCpu" in obs.meta


def test_push_sources_have_nothing_to_poll() -> None:
    m = monitor({"type": "ws", "url": "ws://127.0.0.1:1/"})
    with pytest.raises(errors.SourceError, match="push source") as info:
        observe(m)
    assert not info.value.permanent


def test_registry_matches_schema_enum() -> None:
    import json
    from importlib import resources

    schema = json.loads(resources.files("reconciler").joinpath(
        "schemas/monitor.schema.json").read_text())
    enum = schema["properties"]["source"]["properties"]["type"]["enum"]
    assert sorted(enum) == sorted(str(k) for k in source_types.TYPES)


def test_device_over_https_trusts_its_ca_file_and_poll_http_keeps_its_own_trust(
        tmp_path: Path) -> None:
    """A probe of an ``https://`` peer goes through a client trusting its ``caFile``;
    ``poll-http`` on the same context still refuses the self-signed certificate, and a
    peer without ``caFile`` is a ``tls`` check error naming the device."""
    import ssl

    from tests.helpers import http_server, reply, self_signed

    cert, key = self_signed(tmp_path / "pki")
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    routes = {"/healthz": lambda h: reply(h, 200, b'{"apiVersion": "v1", "headroom": "low"}')}
    with http_server(routes, tls=tls) as url:
        fleet = Fleet((Device(DeviceName("beta"), url, ca_file=cert),
                       Device(DeviceName("other"), url)), exists=True)

        async def go() -> tuple[Observation, BaseException | None, BaseException | None]:
            c = SourceContext.create(fleet=fleet)
            try:
                seen = await source_types.observe(
                    monitor({"type": "device", "device": "beta"}), c)
                errs: list[BaseException | None] = []
                for spec in ({"type": "poll-http", "url": url + "/healthz", "interval": "1m"},
                             {"type": "device", "device": "other"}):
                    try:
                        await source_types.observe(monitor(spec), c)
                        errs.append(None)
                    except errors.SourceError as e:
                        errs.append(e)
                return seen, errs[0], errs[1]
            finally:
                await c.aclose()

        seen, poll_http, other = asyncio.run(go())
    assert seen.text == "reachable\nheadroom: low"
    assert isinstance(poll_http, errors.SourceError) and poll_http.kind == "tls"
    assert str(other) == (
        "tls: device 'other': certificate verify failed: self-signed certificate: set caFile "
        "for device other in fleet.yaml to the PEM of the CA that signed its certificate "
        "(or to that certificate if self-signed)")
