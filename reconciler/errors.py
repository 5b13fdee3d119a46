"""The error tree and the exit-code table shared by every command.

Exit codes (one table for every command; plan's ``--detailed-exitcode`` follows
Terraform's convention of 0 = no changes, 1 = error, 2 = changes):

====  =========================================================
0     ok
1     a user-facing error (bad file, bad flag, dead pid, ...)
2     reserved for "changes present" (``plan --detailed-exitcode``)
3     an internal bug (a traceback we did not expect)
4     incomplete: a fleet device could not be reached (``list``; the rest is shown)
130   interrupted (Ctrl-C)
====  =========================================================

click's own usage errors (normally exit 2) are remapped to 1 so that they can
never read as "changes".
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Process exit codes; see the module docstring for the table."""

    OK = 0
    ERROR = 1
    CHANGES = 2
    BUG = 3
    INCOMPLETE = 4
    INTERRUPTED = 130


class MonitorsError(Exception):
    """Root of every error a user can cause; the CLI prints ``str(e)`` as one line.

    Attributes:
        exit_code: the process exit code the CLI uses for this error.
    """

    exit_code: ExitCode = ExitCode.ERROR


class ConfigError(MonitorsError):
    """A monitor, overlay, fleet or settings file is unusable (bad YAML, bad field)."""


class UsageError(MonitorsError):
    """A bad flag or argument combination on the command line."""


class NotFoundError(MonitorsError):
    """A named monitor, channel, agent or device does not exist."""


class StateError(MonitorsError):
    """The per-machine state directory is unusable (locked, corrupt, future version)."""


class LockedError(StateError):
    """Another daemon holds the state directory's lock.

    Attributes:
        pid: the pid recorded by the holder, when readable.
    """

    exit_code = ExitCode.CHANGES  # DESIGN: a second daemon exits 2 naming the holder

    def __init__(self, message: str, *, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class SourceError(MonitorsError):
    """A source could not produce an observation (a *check error*, not a fire).

    Attributes:
        kind: a short class of failure, e.g. ``timeout``, ``connect``, ``dns``,
            ``tls``, ``spawn``, ``unreadable``; shown in liveness as ``kind: message``.
        permanent: True when retrying cannot help (a spec error): the evaluator
            parks the monitor instead of counting a transient check error.
    """

    def __init__(self, message: str, *, kind: str = "error", permanent: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.permanent = permanent

    def __str__(self) -> str:
        return f"{self.kind}: {self.args[0]}" if self.args else self.kind


class ActionError(MonitorsError):
    """An action could not be dispatched (unknown channel, render error, HTTP failure)."""


class PlanError(MonitorsError):
    """A plan cannot be applied (stale saved plan, mass-stop guard, daemon unreachable)."""
