"""An ``OSError`` met on the state directory -> one ``errors.StateError`` line.

Shared by the daemon and the CLI's client side (``client``): the file, what failed,
and what to do (a writable directory, ``--state-dir``). No other I/O here.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from reconciler import errors
from reconciler.state import lock


def state_error(state_dir: Path, e: OSError, *, doing: str = "") -> errors.StateError:
    """One line for an ``OSError`` met in ``state_dir``: the file, what failed, what to do."""
    where = e.filename if e.filename else state_dir
    what = f"cannot {doing}: " if doing else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return errors.StateError(f"{where}: {what}{lock.describe(e)}")
    return errors.StateError(
        f"{where}: {what}{e.strerror or e}; the state directory {state_dir} must be a "
        "writable directory (choose another with --state-dir or MONITORS_STATE_DIR)")


def _below(path: object, state_dir: Path) -> bool:
    if not isinstance(path, str | bytes | os.PathLike):
        return False
    text = os.path.abspath(os.fsdecode(path))
    base = os.path.abspath(state_dir)
    return text == base or text.startswith(base.rstrip(os.sep) + os.sep)


@contextlib.contextmanager
def state_errors(state_dir: Path) -> Iterator[None]:
    """Re-raise an ``OSError`` on a path in (or of) ``state_dir`` as ``errors.StateError``.

    Other ``OSError``s pass through unchanged.
    """
    try:
        yield
    except OSError as e:
        if _below(e.filename, state_dir) or _below(getattr(e, "filename2", None), state_dir):
            raise state_error(state_dir, e) from e
        raise
