"""No traceback from any argument: durations and times are bounded, text must be UTF-8.

Each refusal is one line naming the option (``error: --wait: ...``), exit 1, and
nothing is written. The classes are covered by walking the commands: every
duration option, and every text option or argument of every command.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from reconciler.cli import main as cli_main
from tests import factories
from tests.conftest import Repo, console_script, run_cli

MONITOR = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
BAD_TEXT = "ok\udcff"  # what Python makes of the argv bytes b"ok\xff" (surrogateescape)


@pytest.fixture
def one(repo: Repo) -> Repo:
    repo.write("monitors.d/x.yml", MONITOR)
    return repo


def _tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` but the audit trail (a refusal is audited: cli.auditing)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "audit.jsonl"}


def _refused(repo: Repo, args: list[str], *, line: str) -> None:
    before = _tree(repo.root)
    r = run_cli(args, repo=repo)
    assert r.exit_code == 1, r.output
    assert r.stderr.splitlines() == [line], r.output
    assert "Traceback" not in r.output
    assert _tree(repo.root) == before


TOO_LONG = "'3000000w' is longer than 3650d, the longest duration accepted"


@pytest.mark.parametrize(("args", "option"), [
    (["apply", "--yes", "--wait", "3000000w"], "--wait"),
    (["run", "--once", "--wait", "3000000w"], "--wait"),
    (["run", "--resync", "3000000w"], "--resync"),
    (["run", "--debounce", "3000000w"], "--debounce"),
    (["stop", "--wait", "3000000w"], "--wait"),
    (["pause", "x", "--until", "3000000w"], "--until"),
    (["add", "z", "--poll", "date", "3000000w", "--notify"], "--poll"),
    (["add", "z", "--watch-file", "/etc/hosts", "--interval", "3000000w", "--notify"],
     "--interval"),
    (["add", "z", "--watch-file", "/etc/hosts", "--rate-limit", "5/3000000w", "--notify"],
     "--rate-limit"),
])
def test_every_duration_option_is_bounded(one: Repo, args: list[str], option: str) -> None:
    _refused(one, args, line=f"error: {option}: {TOO_LONG}")


def test_apply_wait_of_the_issue(one: Repo) -> None:
    _refused(one, ["apply", "--yes", "--wait", "99999999999w"],
             line="error: --wait: '99999999999w' is longer than 3650d, the longest duration "
                  "accepted")


@pytest.mark.parametrize("until", ["9999-12-31T23:59:59-12:00", "9999-12-31T23:59:59",
                                   "9000-01-02", "9999-12-31T23:59:59+14:00"])
def test_pause_until_time_is_bounded(one: Repo, until: str) -> None:
    _refused(one, ["pause", "x", "--until", until],
             line=f"error: --until: {until!r} is later than 9000-01-01T00:00:00Z, the latest "
                  "time accepted")


@pytest.mark.parametrize("until", ["0001-01-01", "0001-01-01T00:00:00",
                                   "0001-01-01T00:00:00+14:00", "1969-12-31T23:59:59Z"])
def test_pause_until_time_is_bounded_on_the_early_side(one: Repo, until: str) -> None:
    """Year 1 raised ``ValueError: year 0 is out of range`` (exit 3), or with +14:00 said
    it was later than the latest time."""
    _refused(one, ["pause", "x", "--until", until],
             line=f"error: --until: {until!r} is earlier than 1970-01-01T00:00:00Z, the "
                  "earliest time accepted")


def test_pause_until_within_bounds_still_works(one: Repo) -> None:
    r = run_cli(["pause", "x", "--until", "3650d"], repo=one)
    assert r.exit_code == 0, r.output
    r = run_cli(["pause", "x", "--until", "8999-12-31T11:00:00-12:00"], repo=one)
    assert r.exit_code == 0, r.output
    assert "until: '8999-12-31T23:00:00+00:00'" in (one.overlays / "x.yml").read_text()


def test_watch_pid_is_bounded(one: Repo) -> None:
    _refused(one, ["add", "z", "--watch-pid", "99999999999999999999", "--notify"],
             line="error: --watch-pid: 99999999999999999999 is not a process id (1..4194304)")


def _text_params() -> Iterator[tuple[list[str], click.Parameter]]:
    """(command path, parameter) for every text option and argument of every command."""
    ctx = click.Context(cli_main.main)

    def walk(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Parameter]]:
        for param in cmd.params:
            if isinstance(param.type, click.types.StringParamType):
                yield path, param
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                yield from walk(sub, [*path, name])

    yield from walk(cli_main.main, [])


TEXT_PARAMS = [pytest.param(path, param, id=" ".join([*path, param.opts[-1]]))
               for path, param in _text_params()]


def test_text_params_cover_every_command_that_takes_text() -> None:
    commands = {" ".join(path) for path, _ in _text_params()}
    assert {"", "add", "pause", "pin", "system pull", "view", "edit", "remove"} <= commands
    assert len(TEXT_PARAMS) > 35


@pytest.mark.parametrize(("bad", "why"), [
    (BAD_TEXT, "not valid UTF-8 (byte 0xff at position 2)"),
    ("ok\x1b[31m", "control character U+001B at position 2"),  # C0
    ("ok\x7f", "control character U+007F at position 2"),  # DEL
    ("ok\x9b", "control character U+009B at position 2"),  # C1 (CSI)
])
@pytest.mark.parametrize(("path", "param"), TEXT_PARAMS)
def test_text_that_is_not_utf8_or_holds_a_control_character_is_refused_naming_the_option(
        one: Repo, path: list[str], param: click.Parameter, bad: str, why: str) -> None:
    if isinstance(param, click.Argument):
        args, name = [*path, bad], param.human_readable_name
    else:
        assert isinstance(param, click.Option)
        needs_name = any(isinstance(p, click.Argument) and p.required
                         for p in _command(path).params)
        values = [bad] + ["5s"] * (param.nargs - 1)
        args = [*path, *(["x"] if needs_name else []), param.opts[-1], *values]
        name = next(o for o in param.opts if o.startswith("--"))
        if not path:  # a global option goes before a command
            args = [*args, "list"]
    _refused(one, args, line=f"error: {name}: {why}")


def test_tab_and_newline_are_accepted_and_the_overlay_loads(one: Repo) -> None:
    r = run_cli(["pause", "x", "--until", "2h", "--reason", "a\tb\nc"], repo=one)
    assert r.exit_code == 0, r.output
    assert run_cli(["lint"], repo=one).exit_code == 0


@pytest.mark.parametrize(("args", "line"), [
    (["add", "z", "--watch-pid", "\uff11\uff12", "--notify"],
     "error: --watch-pid: expected an integer written with the digits 0-9, got '\uff11\uff12'"),
    (["add", "z", "--poll", "echo", "5s", "--rate-limit", "\u0665/1m", "--notify"],
     "error: --rate-limit: expected MAX/DURATION such as 5/1m, got '\u0665/1m'"),
])
def test_integers_in_other_scripts_digits_are_refused(one: Repo, args: list[str],
                                                      line: str) -> None:
    """``int()`` takes any script's decimal digits (``１２``, ``٥``); durations do not."""
    _refused(one, args, line=line)


def _command(path: list[str]) -> click.Command:
    cmd: click.Command = cli_main.main
    for name in path:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(click.Context(cmd), name)
        assert sub is not None
        cmd = sub
    return cmd


def test_device_from_the_environment_is_named_as_such(one: Repo) -> None:
    r = run_cli(["list"], env={"MONITORS_DEVICE": BAD_TEXT})
    assert r.exit_code == 1
    assert r.stderr == "error: MONITORS_DEVICE: not valid UTF-8 (byte 0xff at position 2)\n"


@pytest.mark.parametrize(("argv", "line"), [
    ([b"add", b"z", b"--poll", b"echo \xff", b"5s", b"--notify"],
     "error: --poll: not valid UTF-8 (byte 0xff at position 5)"),
    ([b"pause", b"x", b"--reason", b"\xff"],
     "error: --reason: not valid UTF-8 (byte 0xff at position 0)"),
    ([b"pause", b"x", b"--until", b"2h", b"--reason", b"a\x1b[31mred\x07"],
     "error: --reason: control character U+001B at position 1"),
])
def test_the_issue_inputs_through_a_real_argv(one: Repo, argv: list[bytes], line: str) -> None:
    before = _tree(one.root)
    proc = subprocess.run([console_script(), "--root", str(one.root), "--state-dir",
                           str(one.state), *argv], capture_output=True, timeout=60,
                          cwd=one.root)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.decode().splitlines() == [line]
    assert _tree(one.root) == before


MON = factories.ECHO_MONITOR


@pytest.mark.parametrize("command", ["runs", "logs"])
@pytest.mark.parametrize("limit", ["0", "-3"])
def test_limit_below_1_is_a_usage_error(repo: Repo, command: str, limit: str) -> None:
    repo.write("monitors.d/alpha.yml", MON.format(word="alpha"))
    r = run_cli([command, "alpha", "--limit", limit], repo=repo)  # said "no fires yet"
    assert r.exit_code == 1
    assert "no fires yet" not in r.stdout
    assert "--limit" in r.stderr and "x>=1" in r.stderr
    assert run_cli([command, "alpha", "--limit", "1"], repo=repo).exit_code == 0
