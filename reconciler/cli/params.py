"""Parameter types and checks shared by every command (click only).

``DURATION``: a duration option (``--wait 30s``), parsed and bounded by
``reconciler.durations`` so flags and files accept the same values; a bad one is
one line naming the option (``error: --wait: '3000000w' is longer than 3650d, the
longest duration accepted``), exit 1.

``CheckedContext``: the context class of every command (``cli.main`` installs it).
Before a command's callback runs it refuses, in one line naming the option
(``error: --reason: not valid UTF-8 (byte 0xff at position 0)``), a text value
that is not valid UTF-8. Python decodes ``argv`` and the environment with
``surrogateescape`` (PEP 383), so a byte such as ``\\xff`` arrives as a lone surrogate
that would crash the first UTF-8 write (``UnicodeEncodeError``). ``pathlib.Path``
values are let through: a file name need not be UTF-8 and is only ever used as one.
It refuses a control character the same way (``error: --reason: control character
U+001B at position 1``): C0 other than tab and newline, DEL and C1 (Unicode category
Cc). Written into a generated file or a terminal they would change what is shown, and
YAML refuses most of them, so the file written would not load again.

``INTEGER``: an integer option written in ASCII digits (``--watch-pid 12``); Python's
``int()`` also takes other scripts' digits (``１２``, ``٥``), which durations refuse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import click

from reconciler import durations, errors


def param_name(param: click.Parameter | None, ctx: click.Context | None) -> str:
    """How the user wrote ``param``: its long option (``--wait``), the environment
    variable it came from (``MONITORS_DEVICE``), or an argument's metavar (``NAME``)."""
    if param is None:
        return "value"
    if ctx is not None and param.name and isinstance(param, click.Option) \
            and ctx.get_parameter_source(param.name) is click.core.ParameterSource.ENVIRONMENT \
            and isinstance(param.envvar, str):
        return param.envvar
    if isinstance(param, click.Option):
        longs = [o for o in param.opts if o.startswith("--")]
        return (longs or param.opts)[0]
    return param.human_readable_name


class Duration(click.ParamType[float]):
    """``30s``, ``1h30m``, ``500ms`` or integer seconds -> float seconds (``durations.parse``)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        """Raises: errors.UsageError: ``--wait: <why>`` (not a duration, or too long)."""
        if isinstance(value, float):
            return value
        try:
            return durations.parse(value)
        except ValueError as e:
            raise errors.UsageError(f"{param_name(param, ctx)}: {e}") from None


DURATION = Duration()


class Integer(click.ParamType[int]):
    """An integer in ASCII digits with an optional sign (``12``, ``-3``); ``int()`` alone
    would take any script's decimal digits (``１２``)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        """Raises: errors.UsageError: ``--watch-pid: expected an integer ...``."""
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if not ASCII_INTEGER.fullmatch(text):
            raise errors.UsageError(f"{param_name(param, ctx)}: expected an integer written "
                                    f"with the digits 0-9, got {value!r}")
        return int(text)


ASCII_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
"""An integer as ``INTEGER`` and ``--rate-limit``'s MAX accept it."""

INTEGER = Integer()


def _texts(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _texts(item)


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def control_character(value: object) -> str | None:
    """Why the text in ``value`` holds a control character (C0 other than tab and
    newline, DEL, C1), or None: ``control character U+001B at position 1``."""
    for text in _texts(value):
        found = _CONTROL.search(text)
        if found is not None:
            return f"control character U+{ord(found.group()):04X} at position {found.start()}"
    return None


def not_utf8(value: object) -> str | None:
    """Why the text in ``value`` (a str, or tuples of them) is not valid UTF-8, or None.

    A lone surrogate U+DC80..U+DCFF is an undecodable byte kept by ``surrogateescape``
    (``byte 0xff at position 5``); any other lone surrogate cannot be encoded either.
    """
    for text in _texts(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            char = ord(text[e.start])
            what = (f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF
                    else f"lone surrogate U+{char:04X}")
            return f"not valid UTF-8 ({what} at position {e.start})"
    return None


def check_text(ctx: click.Context) -> None:
    """Refuse the first parameter of ``ctx`` whose text is not valid UTF-8 or holds a
    control character (``control_character``).

    Raises:
        errors.UsageError: naming the option or argument (``--reason: not valid UTF-8
            (byte 0xff at position 0)``, ``--reason: control character U+001B at
            position 1``).
    """
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        problem = not_utf8(value) or control_character(value)
        if problem is not None:
            raise errors.UsageError(f"{param_name(param, ctx)}: {problem}")


class CheckedContext(click.Context):
    """A ``click.Context`` that runs ``check_text`` before invoking a callback."""

    def invoke(self, callback: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(callback, click.Command):
            check_text(self)
        return super().invoke(callback, *args, **kwargs)


def install(command: click.Command) -> click.Command:
    """Give ``command`` (and a group's subcommands) ``CheckedContext``; return it."""
    command.context_class = CheckedContext
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            install(sub)
    return command
