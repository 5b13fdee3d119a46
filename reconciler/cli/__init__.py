"""The command line: click lives here and nowhere else.

Each command is one module exposing ``command`` (a ``click.Command``); ``main``
loads a module only when its command runs, so ``monitors lint`` imports no
HTTP client and no asyncio. A command parses options, calls one core function,
renders, and returns an exit code from ``errors.ExitCode``.
"""
