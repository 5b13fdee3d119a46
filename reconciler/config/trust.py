"""Refuse configuration files a stranger could have written.

Every file monitors reads as configuration decides what runs, what is read and where
it is sent as the user running monitors (often root): a monitor file of either layer
(a ``file`` source with a ``webhook-out`` action sends any file the user can read), an
overlay (pauses, pins), ``monitors.toml`` (any section: ``[system] url``, ``[layers]``,
``stateDir``, agents, routines) and the fleet file. Like sshd's ``StrictModes`` for all
its files (and cron, sudo's ``sudoers`` check), such a file is refused (rule
``unsafe-permissions``) when:

* it is not owned by the user running monitors or by root;
* it is writable by its group or by others. Group write is allowed when the group is
  the owner's private group (its only member is the owner: Debian's OpenSSH
  ``user-group-modes`` rule), so a ``umask 002`` user-private-group set-up passes;
* a directory it depends on is owned by someone else, or is writable by others (or a
  shared group) without the sticky bit (a sticky directory such as ``/tmp`` lets no one
  replace a file they do not own). These are the directories the path passes through
  from the repository root down, and for each symbolic link on the way (the file or
  any directory) the link's directory and every directory its target passes through:
  from the repository root down when the target is inside it, from ``/`` down when it
  is outside (as sshd checks an ``authorized_keys`` target up to ``/``). Directories
  above the repository root are not checked for paths that stay inside it.

Replay files (``monitors test --replay``) are exempt: a fixture the user names.
Pure look-ups (``lstat``, ``readlink``, the user and group databases); no writes.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

RULE = "unsafe-permissions"
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


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _chain(directory: str, root: str) -> list[str]:
    """``directory`` and its parents: up to ``root`` when inside it, else up to ``/``."""
    out = [directory]
    while out[-1] != "/" and out[-1] != root:
        out.append(os.path.dirname(out[-1]))
    return out


def _walk(path: str, root: str) -> tuple[str, list[str]]:
    """Resolve ``path`` (absolute) hop by hop: ``(target, directories it depends on)``.

    The directories: those the path passes through inside ``root``, the directory of
    every symbolic link met, the parents of every link's target (up to ``root`` when
    the target is inside it, else up to ``/``) and the final target's parents likewise.
    Raises OSError (a missing part, a link loop)."""
    dirs: list[str] = []

    def add(*directories: str) -> None:
        dirs.extend(d for d in directories if d not in dirs)

    # ``root`` is resolved (no links in it): a path inside it is walked from it
    inside = _inside(path, root) and ".." not in path.split("/")
    current = root if inside else "/"
    pending = [part for part in path[len(current):].split("/") if part] if inside else \
        [part for part in path.split("/") if part]
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        if _inside(current, root):
            add(current)
        candidate = os.path.join(current, part)
        if not stat.S_ISLNK(os.lstat(candidate).st_mode):
            current = candidate
            continue
        hops += 1
        if hops > 40:  # Linux's MAXSYMLINKS
            raise OSError(f"{path}: too many levels of symbolic links")
        link = os.readlink(candidate)
        add(current)  # the link's directory: whoever may write it may replace the link
        add(*_chain(os.path.dirname(os.path.normpath(os.path.join(current, link))), root))
        if link.startswith("/"):
            current = "/"
        pending[:0] = [p for p in link.split("/") if p]
    add(*_chain(os.path.dirname(current), root))
    return current, dirs


def problem(path: Path, *, root: Path, uid: int | None = None,
            seen: dict[str, str | None] | None = None) -> str | None:
    """Why ``path`` could have been written by another user, or None when it is safe.

    Args:
        path: the file (symbolic links are followed: see the module docstring for the
            directories checked).
        root: the repository root (resolved): directories are checked from it down for
            paths inside it, from ``/`` for symbolic link targets outside it.
        uid: the user running monitors (default: the effective uid).
        seen: directory -> its clause (or None), filled and reused across calls: one
            pass over many files (a load) stats each directory once. Start a new dict
            for each pass, so a changed directory is seen by the next one.

    Returns:
        one clause naming the offending file or directory and the fix, or None. A
        file that cannot be stat'ed gives None (reading it reports that).
    """
    me = os.geteuid() if uid is None else uid
    try:
        target, dirs = _walk(os.path.abspath(path), str(root))
        found = _mode_problem(os.path.abspath(path), os.stat(target), me, directory=False)
        if found:
            return found
        for directory in dirs:
            if seen is not None and directory in seen:
                found = seen[directory]
            else:
                found = _mode_problem(directory, os.stat(directory), me, directory=True)
                if seen is not None:
                    seen[directory] = found
            if found:
                return found
    except OSError:
        return None
    return None


def file_problem(path: Path, what: str, *, root: Path, uid: int | None = None,
                 seen: dict[str, str | None] | None = None) -> str | None:
    """The ``unsafe-permissions`` message for the configuration file ``path`` (``what``
    names it: ``monitor file``, ``overlay``, ``monitors.toml``, ``fleet file``) when
    another user could have written it (see ``problem``), else None.

    ``refused this monitor file: monitors acts on it as root, and another user could
    change it: the file is world-writable (mode 0666): chmod o-w /r/monitors.d/x.yml``
    (``seen``: see ``problem``.)
    """
    found = problem(path, root=root, uid=uid, seen=seen)
    if found is None:
        return None
    me = os.geteuid() if uid is None else uid
    return (f"refused this {what}: monitors acts on it as {_name(me)}, and another user "
            f"could change it: {found}")
