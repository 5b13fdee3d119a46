"""Colour: whether to use it (one rule for every command) and ANSI SGR styling.

``enabled`` is the one place that decides; renderers take the answer as a
``color`` flag and call ``paint``, so no command colours by its own rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TextIO

SGR = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
       "cyan": "36", "white": "37"}


def enabled(stream: TextIO | None, *, no_color: bool = False,
            environ: Mapping[str, str] | None = None) -> bool:
    """Whether output written to ``stream`` gets ANSI colour.

    In order, the first that applies decides (the order of CPython 3.13's
    ``_colorize.can_colorize``): a ``--no-color`` flag -> no; ``NO_COLOR`` set and
    not empty -> no (https://no-color.org); ``FORCE_COLOR`` set and not empty -> yes
    (https://force-color.org); ``TERM=dumb`` -> no; else yes only when ``stream`` is
    a terminal.

    Args:
        stream: where the coloured text goes (``sys.stdout``); None counts as no terminal.
        no_color: the command's ``--no-color`` flag.
        environ: the environment (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    if no_color or env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-less stream
        return False


def paint(text: str, color: bool, *, fg: str | None = None, bold: bool = False) -> str:
    """``text`` in colour ``fg`` (a key of ``SGR``) and/or bold when ``color``, else as is."""
    codes = (["1"] if bold else []) + ([SGR[fg]] if fg else [])
    if not color or not codes:
        return text
    return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"
