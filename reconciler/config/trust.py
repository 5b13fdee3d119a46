"""Refuse files that can run commands when a stranger could have written them.

A monitor file whose source runs a command (``poll``, ``command``) or whose action
starts one (``run``, ``routine``), and a ``monitors.toml`` that defines ``[agents]``
or ``[routines]``, decide what runs as the user running monitors (often root). Like
cron, sudo's ``sudoers`` check and sshd's ``StrictModes``, such a file is refused
(rule ``unsafe-permissions``) when:

* it is not owned by the user running monitors or by root;
* it is writable by its group or by others. Group write is allowed when the group is
  the owner's private group (its only member is the owner: Debian's OpenSSH
  ``user-group-modes`` rule), so a ``umask 002`` user-private-group set-up passes;
* a directory from the file's own directory up to the repository root (the layer
  directory and the root itself) is owned by someone else, or is writable by others
  without the sticky bit (a sticky directory such as ``/tmp`` lets no one replace a
  file they do not own). Directories above the repository root are not checked.

A symbolic link is judged by its target (the target's directory is checked too).
Pure look-ups (``stat``, the user and group databases); no writes, no printing.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.actions import registry as actions_registry
from reconciler.model import Monitor

RULE = "unsafe-permissions"
COMMAND_SOURCES = frozenset({"poll", "command"})
"""Source types that run a command on this machine."""
COMMAND_ACTIONS = actions_registry.PROCESS_TYPES
"""Action types that start a process on this machine."""
COMMAND_SECTIONS = ("agents", "routines")
"""``monitors.toml`` sections that name commands."""


def what_runs(monitor: Monitor) -> str | None:
    """Why ``monitor`` can run commands (``source poll``, ``action run``), or None."""
    source, action = str(monitor.source.get("type")), str(monitor.action.get("type"))
    if source in COMMAND_SOURCES:
        return f"source {source}"
    if action in COMMAND_ACTIONS:
        return f"action {action}"
    return None


def _who(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_DATABASES = ("/etc/passwd", "/etc/group")
_groups: dict[tuple[int, int], tuple[tuple[float, ...], bool]] = {}


def _private_group(gid: int, owner: int) -> bool:
    """True when the group ``gid`` has exactly one member and it is ``owner`` (primary
    and supplementary memberships, as Debian's OpenSSH ``secure_permissions``).
    Remembered until ``/etc/passwd`` or ``/etc/group`` changes (a umask 002 user's
    every file is group-writable: one user database scan per load, not per file)."""
    stamp = tuple(os.stat(f).st_mtime if os.path.exists(f) else -1.0 for f in _DATABASES)
    known = _groups.get((gid, owner))
    if known is not None and known[0] == stamp:
        return known[1]
    answer = _scan_private_group(gid, owner)
    _groups[(gid, owner)] = (stamp, answer)
    return answer


def _scan_private_group(gid: int, owner: int) -> bool:
    try:
        group = grp.getgrgid(gid)
        owner_name = pwd.getpwuid(owner).pw_name
    except KeyError:
        return False
    primary = [p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid]
    if any(uid != owner for uid in primary):
        return False
    if any(member != owner_name for member in group.gr_mem):
        return False
    return bool(primary or group.gr_mem)


def _mode_problem(path: str, st: os.stat_result, uid: int, *, directory: bool) -> str | None:
    kind = f"directory {path}" if directory else "the file"
    if st.st_uid not in (uid, 0):
        either = "" if uid == 0 else " or by root"
        return (f"{kind} is owned by {_who(st.st_uid)}, not by {_who(uid)} who runs monitors"
                f"{either}: chown {_name(uid)} {path}")
    mode = stat.S_IMODE(st.st_mode)
    if directory and mode & stat.S_ISVTX:
        return None
    if mode & stat.S_IWOTH:
        return f"{kind} is world-writable (mode {mode:04o}): chmod o-w {path}"
    if mode & stat.S_IWGRP and not _private_group(st.st_gid, st.st_uid):
        return f"{kind} is group-writable (mode {mode:04o}): chmod g-w {path}"
    return None


def _directories(path: str, root: str) -> list[str]:
    """The file's directory up to ``root`` (inclusive) when below it, else its directory."""
    parent = os.path.dirname(path)
    if parent != root and not parent.startswith(root.rstrip("/") + "/"):
        return [parent]
    chain = [parent]
    while chain[-1] != root and chain[-1] != "/":
        chain.append(os.path.dirname(chain[-1]))
    return chain


def problem(path: Path, *, root: Path, uid: int | None = None) -> str | None:
    """Why ``path`` could have been written by another user, or None when it is safe.

    Args:
        path: the file (a symbolic link is followed; its target and the target's
            directory are checked as well as the link's directories).
        root: the repository root (resolved): directories are checked up to it.
        uid: the user running monitors (default: the effective uid).

    Returns:
        one clause naming the offending file or directory and the fix, or None. A
        file that cannot be stat'ed gives None (reading it reports that).
    """
    me = os.geteuid() if uid is None else uid
    given = os.path.abspath(path)
    try:
        st = os.lstat(given)
        target = os.path.realpath(given) if stat.S_ISLNK(st.st_mode) else given
        if target != given:
            st = os.stat(target)
        found = _mode_problem(given, st, me, directory=False)
        if found:
            return found
        dirs = _directories(given, str(root))
        if os.path.dirname(target) not in dirs:
            dirs.append(os.path.dirname(target))
        for directory in dirs:
            found = _mode_problem(directory, os.stat(directory), me, directory=True)
            if found:
                return found
    except OSError:
        return None
    return None


def monitor_problem(monitor: Monitor, path: Path, *, root: Path) -> str | None:
    """The ``unsafe-permissions`` message for a monitor that can run commands and whose
    file ``path`` is unsafe (see ``problem``), or None."""
    runs = what_runs(monitor)
    if runs is None:
        return None
    found = problem(path, root=root)
    if found is None:
        return None
    return f"refused to run commands ({runs}) from a file another user could change: {found}"


def settings_problem(toml: Mapping[str, Any], path: Path, *, root: Path) -> str | None:
    """``refused its [agents] ...`` when ``monitors.toml`` (``path``, parsed as ``toml``) defines
    ``[agents]`` or ``[routines]`` and is unsafe (see ``problem``); else None. Its
    commands must then not be used (the caller reports this as a ``settings`` error)."""
    sections = [s for s in COMMAND_SECTIONS if toml.get(s)]
    if not sections:
        return None
    found = problem(path, root=root)
    if found is None:
        return None
    named = " and ".join(f"[{s}]" for s in sections)
    return f"refused its {named} (commands from a file another user could change): {found}"
