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
from dataclasses import dataclass, field
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


Hop = tuple[os.stat_result, str | None]
"""One path component's ``lstat`` and, for a symbolic link, its ``readlink`` text."""


@dataclass
class Walks:
    """What one pass over many files (a load) has looked at, so that each directory is
    looked at once a pass (as ``seen``) and a file of a known directory costs one
    ``lstat``. Start a new one for each pass, so a changed directory is seen by the next.

    Attributes:
        hops: a directory component's ``Hop`` by path (never a file's: the last
            component of a walk is always looked at).
        parents: a directory inside the root with no symbolic link on its way ->
            the directories a file in it depends on (``_walk``'s answer, the same for
            every file of that directory that is not a symbolic link).
    """

    hops: dict[str, Hop] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)


def _hop(candidate: str, hops: dict[str, Hop] | None) -> Hop:
    """``candidate``'s ``Hop``, remembered in ``hops`` when given. Raises OSError."""
    if hops is not None:
        known = hops.get(candidate)
        if known is not None:
            return known
    st = os.lstat(candidate)
    hop = (st, os.readlink(candidate) if stat.S_ISLNK(st.st_mode) else None)
    if hops is not None:
        hops[candidate] = hop
    return hop


def _walk_file(path: str, root: str, walks: Walks | None
               ) -> tuple[str, list[str], os.stat_result | None]:
    """``_walk(path, root)``, answered from ``walks`` when a file of the same directory
    inside the root was walked in this pass without meeting a symbolic link, and
    ``path`` itself is not one (then the walk up to the file's directory is the same,
    and so is its answer). Raises OSError."""
    if walks is None:
        return _walk(path, root)
    parent = os.path.dirname(path)
    dirs = walks.parents.get(parent)
    if dirs is not None:
        st, link = _hop(path, None)
        if link is None:
            return path, dirs, st
    target, dirs, final = _walk(path, root, walks.hops)
    if target == path and _inside(parent, root):  # no symbolic link on the way
        walks.parents[parent] = dirs
    return target, dirs, final


def _walk(path: str, root: str, hops: dict[str, Hop] | None = None
          ) -> tuple[str, list[str], os.stat_result | None]:
    """Resolve ``path`` (absolute) hop by hop: ``(target, directories it depends on,
    the target's stat or None when not looked at)``.

    The directories: those the path passes through inside ``root``, the directory of
    every symbolic link met, the parents of every link's target (up to ``root`` when
    the target is inside it, else up to ``/``) and the final target's parents likewise.
    ``hops`` remembers the directories' hops across calls (the last component, the
    file, is never remembered: ``Walks``). Raises OSError (a missing part, a link
    loop)."""
    dirs: list[str] = []
    final: os.stat_result | None = None

    def add(*directories: str) -> None:
        dirs.extend(d for d in directories if d not in dirs)

    # ``root`` is resolved (no links in it): a path inside it is walked from it
    inside = _inside(path, root) and ".." not in path.split("/")
    current = root if inside else "/"
    pending = [part for part in path[len(current):].split("/") if part] if inside else \
        [part for part in path.split("/") if part]
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current, final = os.path.dirname(current), None
            continue
        if _inside(current, root):
            add(current)
        candidate = os.path.join(current, part)
        st, link = _hop(candidate, hops if pending else None)
        if link is None:
            current, final = candidate, st
            continue
        final = None
        followed += 1
        if followed > 40:  # Linux's MAXSYMLINKS
            raise OSError(f"{path}: too many levels of symbolic links")
        add(current)  # the link's directory: whoever may write it may replace the link
        add(*_chain(os.path.dirname(os.path.normpath(os.path.join(current, link))), root))
        if link.startswith("/"):
            current = "/"
        pending[:0] = [p for p in link.split("/") if p]
    add(*_chain(os.path.dirname(current), root))
    return current, dirs, final


def problem(path: Path, *, root: Path, uid: int | None = None,
            seen: dict[str, str | None] | None = None,
            walks: Walks | None = None) -> str | None:
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
        walks: the hops of one pass (``Walks``), filled and reused across its calls
            like ``seen``.

    Returns:
        one clause naming the offending file or directory and the fix, or None. A
        file that cannot be stat'ed gives None (reading it reports that).
    """
    me = os.geteuid() if uid is None else uid
    try:
        absolute = os.path.abspath(path)
        target, dirs, final = _walk_file(absolute, str(root), walks)
        found = _mode_problem(absolute, final if final is not None else os.stat(target), me,
                              directory=False)
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
                 seen: dict[str, str | None] | None = None,
                 walks: Walks | None = None) -> str | None:
    """The ``unsafe-permissions`` message for the configuration file ``path`` (``what``
    names it: ``monitor file``, ``overlay``, ``monitors.toml``, ``fleet file``) when
    another user could have written it (see ``problem``), else None.

    ``refused this monitor file: monitors acts on it as root, and another user could
    change it: the file is world-writable (mode 0666): chmod o-w /r/monitors.d/x.yml``
    (``seen``, ``walks``: see ``problem``.)
    """
    found = problem(path, root=root, uid=uid, seen=seen, walks=walks)
    if found is None:
        return None
    me = os.geteuid() if uid is None else uid
    return (f"refused this {what}: monitors acts on it as {_name(me)}, and another user "
            f"could change it: {found}")
