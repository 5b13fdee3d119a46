"""poll and command sources against real subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from reconciler import errors
from reconciler.model import Observation
from reconciler.sources import Started, command, pid, poll
from reconciler.sources.context import SourceContext
from tests.factories import monitor


def ctx() -> SourceContext:
    return SourceContext.create()


def observe_poll(cmd: str | list[str], **spec: object) -> Observation:
    m = monitor({"type": "poll", "command": cmd, "interval": "30s", **spec})

    async def go() -> Observation:
        c = ctx()
        try:
            return await poll.observe(m, c)
        finally:
            await c.aclose()

    return asyncio.run(go())


def wait_dead(p: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid.alive(p):
            return True
        time.sleep(0.02)
    return False


def test_stdout_and_exit_code_are_observation_and_meta() -> None:
    obs = observe_poll("echo hello; echo oops >&2; exit 3")
    assert obs.text == "hello\n"
    assert obs.meta["exitCode"] == 3
    assert obs.meta["stderrTail"] == "oops\n"
    assert obs.meta["truncated"] is False
    assert obs.meta["duration"] >= 0


def test_list_command_is_argv_without_shell(tmp_path: Path) -> None:
    obs = observe_poll(["echo", "$HOME; rm -rf /"], cwd=str(tmp_path))
    assert obs.text == "$HOME; rm -rf /\n"


def test_cwd_and_env() -> None:
    obs = observe_poll("pwd; echo $FOO", cwd="/", env={"FOO": "bar"})
    assert obs.text == "/\nbar\n"


def test_env_expands_names_from_the_environment_and_registers_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "s3cr3t-value")
    m = monitor({"type": "poll", "command": "echo $X", "interval": "30s",
                 "env": {"X": "Bearer ${MY_TOKEN}"}})

    async def go() -> tuple[Observation, tuple[str, ...]]:
        c = ctx()
        try:
            return await poll.observe(m, c), c.redactor.secrets
        finally:
            await c.aclose()

    obs, registered = asyncio.run(go())
    assert obs.text == "Bearer s3cr3t-value\n"  # the child saw the value, not "${MY_TOKEN}"
    assert registered == ("s3cr3t-value",)


def test_env_naming_an_unset_variable_is_a_check_error_naming_it() -> None:
    with pytest.raises(errors.SourceError, match="env X: environment variable NO_SUCH_X_VAR "
                       "is not set") as info:
        observe_poll("echo $X", env={"X": "${NO_SUCH_X_VAR}"})
    assert info.value.kind == "config" and not info.value.permanent


def test_command_env_naming_an_unset_variable_is_a_check_error_then_a_retry() -> None:
    m = monitor({"type": "command", "command": "echo $X; sleep 30", "backoff": "1s",
                 "env": {"X": "${NO_SUCH_X_VAR}"}})

    async def go() -> list[object]:
        c = ctx()
        stream = command.stream(m, c)
        items: list[object] = []
        try:
            async with asyncio.timeout(10):
                async for item in stream:
                    items.append(item)
                    if len(items) == 2:
                        break
        finally:
            await stream.aclose()
            await c.aclose()
        return items

    items = asyncio.run(go())
    assert all(isinstance(i, errors.SourceError) and "NO_SUCH_X_VAR is not set" in str(i)
               for i in items), items


def test_invalid_utf8_is_replaced_whatever_the_locale() -> None:
    obs = observe_poll(["printf", "ok \\377\\376 end"], env={"LC_ALL": "C"})
    assert obs.text == "ok \ufffd\ufffd end"


def test_five_megabytes_capped_and_marked() -> None:
    started = time.monotonic()
    obs = observe_poll(f"{sys.executable} -c \"import sys; sys.stdout.write('y' * 5_000_000)\"",
                       maxBytes=1024 * 1024, timeout="20s")
    assert len(obs.text) == 1024 * 1024
    assert obs.meta["truncated"] is True and obs.meta["exitCode"] == 0
    assert time.monotonic() - started < 15


def test_timeout_kills_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    started = time.monotonic()
    with pytest.raises(errors.SourceError) as info:
        observe_poll(f"sleep 300 & echo $! > {pidfile}; wait", timeout="1s")
    assert info.value.kind == "timeout"
    assert "process group killed" in str(info.value)
    assert time.monotonic() - started < 5
    grandchild = int(pidfile.read_text())
    assert wait_dead(grandchild), "grandchild survived the timeout"


def test_background_grandchild_holding_stdout_does_not_hang(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg"
    started = time.monotonic()
    try:
        obs = observe_poll(f"echo hi; (sleep 30; echo late) & echo $! > {pidfile}", timeout="20s")
        assert obs.text == "hi\n" and obs.meta["exitCode"] == 0
        assert time.monotonic() - started < 5
    finally:
        with contextlib.suppress(Exception):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_spawn_failure_is_check_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing"  # (a fixed path such as /nonexistent may exist)
    with pytest.raises(errors.SourceError) as info:
        observe_poll([str(missing / "program")])
    assert info.value.kind == "spawn"
    with pytest.raises(errors.SourceError) as info2:
        observe_poll("true", cwd=str(missing / "dir"))
    assert info2.value.kind == "spawn"


def test_command_stream_lines_restart_and_kill_on_close(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    pidfile = tmp_path / "pid"
    script = (f"echo x >> {counter}; echo $$ > {pidfile}; printf 'one\\ntwo\\n'; "
              "if [ $(wc -l < " + str(counter) + ") -ge 2 ]; then sleep 300; fi")
    m = monitor({"type": "command", "command": script, "backoff": "1s"})

    async def go() -> list[object]:
        c = ctx()
        items: list[object] = []
        stream = command.stream(m, c)
        try:
            async with asyncio.timeout(20):
                async for item in stream:
                    items.append(item)
                    if sum(isinstance(i, Observation) for i in items) == 4:
                        break
        finally:
            await stream.aclose()
            await c.aclose()
        return items

    items = asyncio.run(go())
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["Started", "Observation", "Observation", "SourceError",
                     "Started", "Observation", "Observation"]
    texts = [i.text for i in items if isinstance(i, Observation)]
    assert texts == ["one", "two", "one", "two"]
    err = items[3]
    assert isinstance(err, errors.SourceError) and err.kind == "exited"
    assert wait_dead(int(pidfile.read_text())), "closing the stream left the command running"


def _stream_until_errors(m: object, errors_wanted: int,
                         timeout: float) -> list[tuple[float, object]]:
    """Items of ``command.stream(m)`` with their monotonic time, up to the n-th check error."""

    async def go() -> list[tuple[float, object]]:
        c = ctx()
        out: list[tuple[float, object]] = []
        stream = command.stream(m, c)  # type: ignore[arg-type]
        try:
            async with asyncio.timeout(timeout):
                async for item in stream:
                    out.append((time.monotonic(), item))
                    if sum(isinstance(i, errors.SourceError) for _, i in out) == errors_wanted:
                        break
        finally:
            await stream.aclose()
            await c.aclose()
        return out

    return asyncio.run(go())


def test_command_line_past_the_cap_is_a_check_error_naming_it() -> None:
    m = monitor({"type": "command", "command": "printf '%0200d\\nshort\\n' 0; sleep 30",
                 "maxBytes": 100})
    items = [item for _, item in _stream_until_errors(m, 1, timeout=10)]
    assert [type(i).__name__ for i in items] == ["Started", "SourceError"]
    err = items[1]
    assert isinstance(err, errors.SourceError) and err.kind == "line-too-long"
    assert "longer than maxBytes (100 bytes)" in str(err)


def test_command_endless_line_restarts_with_backoff_without_spinning() -> None:
    m = monitor({"type": "command", "command": ["cat", "/dev/zero"], "backoff": "1s"})
    cpu = time.process_time()
    began = time.monotonic()
    items = _stream_until_errors(m, 3, timeout=15)
    cpu, wall = time.process_time() - cpu, time.monotonic() - began
    errs = [i for _, i in items if isinstance(i, errors.SourceError)]
    assert all(e.kind == "line-too-long" and "(1048576 bytes)" in str(e) for e in errs)
    starts = [t for t, i in items if isinstance(i, Started)]
    assert len(starts) == 3
    assert starts[1] - starts[0] >= 1.0 and starts[2] - starts[1] >= 2.0  # the backoff doubles
    assert cpu < 0.5 * wall, f"{cpu:.2f}s of CPU in {wall:.2f}s"


def test_command_exit_with_background_grandchild_still_restarts(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg"
    m = monitor({"type": "command",
                 "command": f"echo a; (sleep 30; echo late) & echo $! >> {pidfile}",
                 "backoff": "1s"})

    async def go() -> list[str]:
        c = ctx()
        kinds: list[str] = []
        stream = command.stream(m, c)
        try:
            async with asyncio.timeout(10):
                async for item in stream:
                    kinds.append(type(item).__name__)
                    if kinds.count("SourceError") == 1:
                        break
        finally:
            await stream.aclose()
            await c.aclose()
        return kinds

    try:
        assert asyncio.run(go()) == ["Started", "Observation", "SourceError"]
    finally:
        for line in pidfile.read_text().split():
            with contextlib.suppress(Exception):
                os.kill(int(line), signal.SIGKILL)


def test_cancel_while_spawning_kills_the_process_group(tmp_path: Path) -> None:
    from reconciler.sources import process

    pidfile = tmp_path / "pid"

    async def go() -> None:
        spec = {"command": f"sleep 300 & echo $! > {pidfile}; wait"}
        task = asyncio.ensure_future(process.spawn(spec))
        await asyncio.sleep(0)  # the child is being set up
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    # either the shell never got as far as the background sleep, or it is killed
    deadline = asyncio.run(_wait_pidfile(pidfile))
    if deadline is not None:
        assert _wait_dead(deadline), "the background sleep outlived a cancelled spawn"


async def _wait_pidfile(path: Path) -> int | None:
    for _ in range(50):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.02)
    return None


def _wait_dead(pid: int) -> bool:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    os.kill(pid, 9)
    return False
