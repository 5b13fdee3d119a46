"""How ``monitors add`` asks for a type: one flag per source, condition or action type.

A leaf (imports only the standard library): each type module declares its ``ADD`` flag
with it; ``cli/add.py`` makes the click option from it and ``config.authoring.adddoc``
reads the value back under ``dest``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AddFlag:
    """One ``monitors add`` flag.

    Attributes:
        flag: the option, e.g. ``--poll``, ``--match``, ``--webhook-out``.
        metavar: its value(s) in ``--help`` (``CMD INTERVAL``, ``RE``, ``[CHANNEL]``), or
            None for a switch taking no value (``--every``).
        help: one line for ``--help``.
        nargs: values per use (``--poll`` and ``--poll-http`` take the interval as the
            second value).
        multiple: repeatable (``--on``); the value is then a tuple of strings.
        integer: the value is an int (``--watch-pid``).
        interval: ``--interval`` applies to this source.
        optional_value: the flag may be given without a value (``--notify``: ``""``).
        takes_prompt: ``--prompt TEXT`` goes with it (an action).
    """

    flag: str
    metavar: str | None
    help: str
    nargs: int = 1
    multiple: bool = False
    integer: bool = False
    interval: bool = False
    optional_value: bool = False
    takes_prompt: bool = False

    @property
    def dest(self) -> str:
        """The click parameter name: ``--watch-pid`` -> ``watch_pid``."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def switch(self) -> bool:
        """The flag takes no value (``--on-change``, ``--every``)."""
        return self.metavar is None
