"""The action sections of ``monitors.toml``: agents, routines, channels, owner.

::

    [agents.NAME]        argv = ["claude", "-p", "{prompt}"]       # overrides a default agent
    [routines.NAME]      argv = ["make", "-C", "~/src/app", "deploy"]
                         cwd = "~/src/app"  env = {TOKEN = "${DEPLOY_TOKEN}"}
                         timeout = "10m"    overlap = "skip"
    [channels.NAME]      url = "ntfy://ntfy.sh/my-topic"       # any Apprise URL; ${ENV} allowed
                         timeout = "10s"    maxAttempts = 3
                         rateLimit = {max = 30, per = "1m"}
    [owner]              channels = ["log"]                        # default channels (the default)

Also ``${NAME}`` expansion of environment variables for actions (``expand``, on
``reconciler.redaction``, whose ``Redactor`` is re-exported here). Pure: reads only
the given mapping and environment; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler import durations, errors, redaction
from reconciler.model import RateLimit
from reconciler.redaction import Redactor as Redactor  # re-exported: the shared redactor

LOG_CHANNEL = "log"
OVERLAPS = ("skip", "queue", "parallel")
DEFAULT_RUN_TIMEOUT = 1800.0
DEFAULT_CHANNEL_TIMEOUT = 30.0
DEFAULT_CHANNEL_ATTEMPTS = 3
PROMPT = "{prompt}"

# Defaults for common agent CLIs; ``[agents.NAME]`` in monitors.toml overrides them.
DEFAULT_AGENTS: Mapping[str, tuple[str, ...]] = {
    "claude": ("claude", "-p", PROMPT),
    "codex": ("codex", "exec", PROMPT),
    "gemini": ("gemini", "-p", PROMPT),
    "opencode": ("opencode", "run", PROMPT),
    "aider": ("aider", "--yes", "--message", PROMPT),
}

def expand(text: str, *, environ: Mapping[str, str], redactor: Redactor | None = None) -> str:
    """``redaction.expand`` for actions: replace each ``${NAME}`` in ``text`` by the
    environment variable's value and register each value with ``redactor``.

    Raises:
        errors.ActionError: a referenced variable is not set (named, never its value).
    """
    try:
        return redaction.expand(text, environ=environ, redactor=redactor)
    except redaction.Unset as e:
        raise errors.ActionError(str(e)) from None


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """An argv template (agent or routine). ``{prompt}`` elements take the prompt.

    Attributes:
        name: the agent or routine name.
        argv: the argv template (never run through a shell).
        cwd: working directory (``~`` expanded, relative to the repository root at
            spawn), None for the default (the repository root).
        env: extra environment (values may reference ``${ENV}``).
        timeout: seconds, None for the action's default.
        overlap: skip | queue | parallel, None for the action's default.
    """

    name: str
    argv: tuple[str, ...]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    overlap: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """A notify channel.

    Attributes:
        name: the channel name (``log`` is built in).
        url: the Apprise URL (may reference ``${ENV}``), None for the built-in ``log``.
        timeout: seconds per delivery attempt.
        max_attempts: delivery attempts before the dispatch fails.
        rate_limit: at most ``max`` deliveries per ``per`` seconds (further ones wait), or None.
    """

    name: str
    url: str | None = None
    timeout: float = DEFAULT_CHANNEL_TIMEOUT
    max_attempts: int = DEFAULT_CHANNEL_ATTEMPTS
    rate_limit: RateLimit | None = None


@dataclass(frozen=True, slots=True)
class ActionsConfig:
    """The parsed action sections of ``monitors.toml``."""

    agents: Mapping[str, CommandSpec]
    routines: Mapping[str, CommandSpec]
    channels: Mapping[str, ChannelSpec]
    owner_channels: tuple[str, ...] = (LOG_CHANNEL,)


class SettingsError(errors.ConfigError):
    """``monitors.toml: field: message``, with the field and message kept apart so
    that lint can point at the field's line (``config.settings_check.at_field``).

    Attributes:
        field: the dotted field (``channels.phone.maxAttempts``).
        detail: what is wrong with it.
    """

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"monitors.toml: {field}: {detail}")
        self.field = field
        self.detail = detail


def _fail(where: str, message: str) -> SettingsError:
    return SettingsError(where, message)


def _table(toml: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = toml.get(key, {})
    if not isinstance(value, Mapping):
        raise _fail(key, "must be a table")
    return value


def _duration(where: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        return durations.parse(value)
    except ValueError as e:
        raise _fail(where, str(e)) from e


def _command(kind: str, name: str, raw: Any) -> CommandSpec:
    where = f"{kind}.{name}"
    if not isinstance(raw, Mapping):
        raise _fail(where, "must be a table")
    argv = raw.get("argv")
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise _fail(f"{where}.argv", "must be a non-empty list of strings")
    env = raw.get("env", {})
    if not (isinstance(env, Mapping) and all(isinstance(v, str) for v in env.values())):
        raise _fail(f"{where}.env", "must be a table of strings")
    overlap = raw.get("overlap")
    if overlap is not None and overlap not in OVERLAPS:
        raise _fail(f"{where}.overlap", f"must be one of {', '.join(OVERLAPS)}")
    cwd = raw.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _fail(f"{where}.cwd", "must be a string")
    return CommandSpec(
        name=name,
        argv=tuple(argv),
        cwd=cwd,
        env={str(k): v for k, v in env.items()},
        timeout=_duration(f"{where}.timeout", raw.get("timeout")),
        overlap=overlap,
    )


def _channel(name: str, raw: Any) -> ChannelSpec:
    where = f"channels.{name}"
    if not isinstance(raw, Mapping):
        raise _fail(where, "must be a table")
    url = raw.get("url")
    if name == LOG_CHANNEL:
        raise _fail(where, "'log' is the built-in channel and cannot be redefined")
    if not isinstance(url, str) or not url:
        raise _fail(f"{where}.url", "must be an Apprise URL string")
    attempts = raw.get("maxAttempts", DEFAULT_CHANNEL_ATTEMPTS)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= 20:
        raise _fail(f"{where}.maxAttempts", "must be an integer from 1 to 20")
    rate = raw.get("rateLimit")
    limit = None
    if rate is not None:
        if not (isinstance(rate, Mapping) and isinstance(rate.get("max"), int)):
            raise _fail(f"{where}.rateLimit", "must be a table {max = N, per = DURATION}")
        per = _duration(f"{where}.rateLimit.per", rate.get("per", "1m"))
        limit = RateLimit(int(rate["max"]), per or 60.0)
    timeout = _duration(f"{where}.timeout", raw.get("timeout"))
    return ChannelSpec(
        name=name,
        url=url,
        timeout=timeout if timeout is not None else DEFAULT_CHANNEL_TIMEOUT,
        max_attempts=attempts,
        rate_limit=limit,
    )


def parse(toml: Mapping[str, Any]) -> ActionsConfig:
    """Build the ``ActionsConfig`` from a parsed ``monitors.toml`` (``Settings.toml``).

    Default agents (``DEFAULT_AGENTS``) are present unless overridden; the
    channel ``log`` is always present; ``[owner] channels`` defaults to ``["log"]``.

    Raises:
        errors.ConfigError: ``monitors.toml: section.name.field: what is wrong``.
    """
    agents = {n: CommandSpec(name=n, argv=argv) for n, argv in DEFAULT_AGENTS.items()}
    for name, raw in _table(toml, "agents").items():
        agents[str(name)] = _command("agents", str(name), raw)
    routines = {
        str(n): _command("routines", str(n), r) for n, r in _table(toml, "routines").items()
    }
    channels = {LOG_CHANNEL: ChannelSpec(name=LOG_CHANNEL)}
    for name, raw in _table(toml, "channels").items():
        channels[str(name)] = _channel(str(name), raw)
    owner = _table(toml, "owner")
    owner_channels = owner.get("channels", [LOG_CHANNEL])
    if not (isinstance(owner_channels, list) and all(isinstance(c, str) for c in owner_channels)):
        raise _fail("owner.channels", "must be a list of channel names")
    for c in owner_channels:
        if c not in channels:
            raise _fail("owner.channels", f"unknown channel {c!r} (define [channels.{c}])")
    return ActionsConfig(
        agents=agents,
        routines=routines,
        channels=channels,
        owner_channels=tuple(owner_channels) or (LOG_CHANNEL,),
    )

