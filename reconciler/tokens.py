"""The bearer token of the daemon's HTTP API: where it comes from, how it is compared.

One token per device. The daemon requires it on every HTTP endpoint but
``/healthz`` and ``/readyz``; clients (``list``'s fan-out, ``add``'s fleet
duplicate check, ``plan --device``, the ``device`` source) send a peer the
token named by its ``tokenEnv`` in the fleet file, else this device's own.

Where the token comes from, first match wins (the settings rule: environment >
``monitors.toml`` > default):

1. ``MONITORS_TOKEN`` (environment);
2. the file ``[http] tokenFile`` of monitors.toml (relative to the repository
   root), else ``<state>/http.token`` when it exists.

A token file must be a regular file of the current user with mode 0600 (no
group or other bits; sshd's rule for private keys): anything else is refused
with one line naming the file and the ``chmod`` that fixes it. Comparison is
constant time (``hmac.compare_digest``). A token is never logged or shown.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from reconciler import errors, settings

ENV = "MONITORS_TOKEN"
DEFAULT_FILE = "http.token"
TOKEN_BYTES = 32
"""Random bytes of a new token (``secrets.token_urlsafe``: 43 characters)."""
MAX_FILE_BYTES = 4096


def token_file(cfg: settings.Settings) -> Path:
    """``[http] tokenFile`` (relative to the root) or ``<state>/http.token``."""
    configured = cfg.section("http").get("tokenFile")
    if isinstance(configured, str) and configured:
        return cfg.root / configured
    return cfg.state_dir / DEFAULT_FILE


def read_file(path: Path) -> str:
    """The token in ``path`` (surrounding whitespace stripped).

    Raises:
        errors.ConfigError: unreadable, not a regular file, group/other mode bits
            set (``chmod 600``), owned by another user, or empty.
    """
    try:
        info = path.stat()
    except OSError as e:
        raise errors.ConfigError(f"{path}: cannot read the token file: "
                                 f"{e.strerror or e}") from e
    if not stat.S_ISREG(info.st_mode):
        raise errors.ConfigError(f"{path}: the token file is not a regular file")
    if info.st_mode & 0o077:
        raise errors.ConfigError(
            f"{path}: the token file must be mode 0600, not {stat.S_IMODE(info.st_mode):04o} "
            f"(run: chmod 600 {path})")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise errors.ConfigError(f"{path}: the token file belongs to another user "
                                 f"(uid {info.st_uid})")
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_FILE_BYTES).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise errors.ConfigError(f"{path}: cannot read the token file: {e}") from e
    if not text:
        raise errors.ConfigError(f"{path}: the token file is empty "
                                 "(run: monitors token create)")
    return text


def read(cfg: settings.Settings, *, environ: dict[str, str] | None = None) -> str | None:
    """This device's token, or None when none is configured (see the module docstring).

    Raises:
        errors.ConfigError: the token file exists (or is configured) but is refused.
    """
    env = os.environ if environ is None else environ
    value = env.get(ENV, "").strip()
    if value:
        return value
    path = token_file(cfg)
    configured = bool(cfg.section("http").get("tokenFile"))
    if not configured and not path.exists():
        return None
    return read_file(path)


def create(path: Path) -> Path:
    """Write a new random token to ``path`` (mode 0600, atomically; replaces an old one).

    Returns:
        ``path``.

    Raises:
        OSError: the file cannot be written.
    """
    from reconciler import atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, (secrets.token_urlsafe(TOKEN_BYTES) + "\n").encode(),
                       durable=True, mode=0o600)
    return path


def matches(given: str | None, expected: str | None) -> bool:
    """Whether ``given`` equals ``expected``, in constant time; False when either is
    missing (a daemon without a token refuses every authenticated request)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
