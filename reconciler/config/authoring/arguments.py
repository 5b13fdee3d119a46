"""The arguments every authoring command shares: monitor and device names, the
``--devices`` and ``KEY=VALUE`` label lists, and the ``monitors ...`` command line
written into generated headers.

Pure checks raising ``errors.UsageError`` (one line naming the flag); must not read
or write files, and must not know any one command's rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from reconciler import errors
from reconciler import settings as settings_mod

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
DEVICE_RE = re.compile(settings_mod.DEVICE_PATTERN)


def check_name(name: str) -> None:
    """Raise ``errors.UsageError`` unless ``name`` is a valid monitor name."""
    if not NAME_RE.fullmatch(name):
        raise errors.UsageError(
            f"{name!r} is not a valid monitor name: lowercase letters, digits and -, "
            "starting with a letter, at most 63 characters"
        )


def check_device(device: str, *, flag: str = "--device") -> None:
    """Raise ``errors.UsageError`` unless ``device`` is a valid device name."""
    if not DEVICE_RE.fullmatch(device):
        raise errors.UsageError(
            f"{flag}: {device!r} is not a valid device name (letters, digits, '.', '_', '-')"
        )


def split_devices(value: str) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``, each checked.

    Raises:
        errors.UsageError: empty list or an invalid name.
    """
    devices = tuple(d.strip() for d in value.split(",") if d.strip())
    if not devices:
        raise errors.UsageError("--devices: expected a comma-separated list such as a,b")
    for d in devices:
        check_device(d, flag="--devices")
    if len(set(devices)) != len(devices):
        raise errors.UsageError(f"--devices: a device is listed twice in {value!r}")
    return devices


def parse_labels(values: Iterable[str], *, flag: str = "--label") -> dict[str, str]:
    """``["team=ci", ...]`` -> ``{"team": "ci"}``.

    Raises:
        errors.UsageError: an entry without ``=`` or with an empty key.
    """
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise errors.UsageError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def command_line(words: Sequence[str]) -> str:
    """``monitors`` + the shell-quoted words, for generated headers."""
    import shlex

    return shlex.join(["monitors", *words])
