"""The console script's first step: ``monitors --version`` without loading the CLI.

``monitors --version`` is what scripts and bug reports run; it answers from
``reconciler.__version__`` (the one source of the version: ``pyproject.toml`` reads
it) before click and the command tree are imported, in about the time the
interpreter takes to start. Anything else goes to ``main.entry`` (where
``--version`` after a global option is answered by click, with the same text).
"""

from __future__ import annotations

import sys

from reconciler import __version__

VERSION_TEXT = f"monitors, version {__version__}"
"""What ``--version`` prints (click's ``version_option`` format, which ``main`` uses)."""


def entry(argv: list[str] | None = None) -> None:
    """Console-script entry (``monitors``): print the version for a lone ``--version``,
    else run the command line (``main.entry``); exits with the command's code."""
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        sys.stdout.write(VERSION_TEXT + "\n")
        sys.exit(0)
    from reconciler.cli import main

    main.entry(args)
