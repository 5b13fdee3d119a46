"""Static checks of an action for lint: templates, argv templates, named agents/routines/channels.

Pure: no I/O. ``problems`` returns ``(path, message)`` pairs with paths relative
to the monitor document (``action.prompt``), ready for ``file:line:col: path: message``.

``references`` (the agent/routine/channel names and a run's command) needs no
Jinja2, and this module imports ``templating`` (which imports Jinja2) only when
``problems`` checks a template, so ``monitors lint`` can call ``references``
without loading Jinja2 (it checks templates with ``config.semantic``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from reconciler.actions import registry
from reconciler.actions.options import ActionsConfig

if TYPE_CHECKING:
    from reconciler.config.problems import Problem
    from reconciler.settings import Settings


def problems(
    action: Mapping[str, Any], config: ActionsConfig | None = None
) -> list[tuple[str, str]]:
    """What is statically wrong with a (raw or normalized) ``action`` mapping: its
    ``prompt``/``message`` templates (``templating.check``) and ``references``.

    Args:
        action: the monitor's ``action``.
        config: the parsed monitors.toml sections; None skips the name look-ups.
    """
    out: list[tuple[str, str]] = []
    found = registry.TYPES.get(str(action.get("type")))
    for key in found.TEMPLATES if found is not None else ():
        text = action.get(key)
        if isinstance(text, str):
            from reconciler.actions import templating

            problem = templating.check(text)
            if problem:
                out.append((f"action.{key}", problem))
    out.extend(references(action, config))
    return out


def references(
    action: Mapping[str, Any], config: ActionsConfig | None = None
) -> list[tuple[str, str]]:
    """The non-template checks of an ``action`` mapping: its type module's ``check``
    (a run needs an agent or a command, a command's argv template must be usable,
    the named agent, routine or channel must be defined in ``config``).

    Args:
        action: the monitor's ``action`` (raw or normalized).
        config: the parsed monitors.toml sections; None skips the name look-ups.

    Returns:
        ``(dotted field, message)`` pairs such as ``("action.agent", "unknown agent ...")``.
    """
    found = registry.TYPES.get(str(action.get("type")))
    return found.check(action, config) if found is not None else []


def __getattr__(name: str) -> ModuleType:
    """``checks.templating`` stays available (imported on first use)."""
    if name == "templating":
        from reconciler.actions import templating

        return templating
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def bound(cfg: Settings, *, partial: bool = False
          ) -> tuple[Callable[[Mapping[str, Any]], list[tuple[str, str]]] | None, list[Problem]]:
    """The action check ``monitors lint``, ``plan`` and the daemon share.

    ``references`` bound to the parsed monitors.toml: agent, routine and channel names
    must be defined, a run needs an agent or a usable command. Templates are checked by
    ``config.semantic`` (without Jinja2 unless a template needs it), not here. Reads
    ``cfg.toml`` (and, only when it has problems, monitors.toml's text for positions).

    Returns:
        ``(check, [])`` with a picklable check for ``config.loader.load(action_check=)``,
        or ``(None, problems)`` when monitors.toml is invalid: its schema problems
        (``config.settings_check.settings_problems``: unknown keys with a did-you-mean,
        wrong types, bad durations) at their ``line:col``, else the one ``settings``
        error of its agents, routines, channels or owner (``options.parse``) at its
        field (names are not checked then).
        (An untrusted monitors.toml never gets here: ``settings.load`` refuses it,
        ``config.trust``.)
        With ``partial`` (lint: everything at once), schema problems do not stop the
        rest: each agent, routine and channel is checked on its own (a ``[channels.log]``
        redefinition is reported beside an unknown key), and when the three sections
        are tables the check is returned too, so references to names they do not
        define are reported in the same run (``_despite``).
    """
    import functools

    from reconciler import errors
    from reconciler.actions import options
    from reconciler.config import settings_check

    found = settings_check.settings_problems(cfg)
    if found:
        return _despite(cfg, found) if partial else (None, found)
    try:
        config = options.parse(cfg.toml)
    except options.SettingsError as e:
        return None, [settings_check.at_field(cfg, e.field, e.detail)]
    except errors.ConfigError as e:
        return None, [settings_check.at_field(cfg, "", str(e))]
    return functools.partial(references, config=config), []


def _despite(cfg: Settings, found: list[Problem]
             ) -> tuple[Callable[[Mapping[str, Any]], list[tuple[str, str]]] | None,
                        list[Problem]]:
    """``bound``'s answer for lint when monitors.toml has schema problems ``found``: those,
    plus each entry's own ``options.parse`` error when it is not at or below a field the
    schema already reported, plus a name look-up check over the names the sections
    define (None when a section is not a table: its names are unknown)."""
    import functools

    from reconciler.actions import options
    from reconciler.config import settings_check

    reported = {p.field for p in found}
    out = list(found)
    names: dict[str, set[str]] = {}
    for section in ("agents", "routines", "channels"):
        table = cfg.toml.get(section, {})
        if not isinstance(table, Mapping):
            continue
        names[section] = {str(n) for n in table}
        for name, raw in table.items():
            try:
                options.parse({section: {name: raw}})
            except options.SettingsError as e:
                if not any(e.field == f or e.field.startswith(f + ".") for f in reported):
                    out.append(settings_check.at_field(cfg, e.field, e.detail))
    if len(names) < 3:
        return None, out
    spec = options.CommandSpec(name="", argv=("",))  # stands in: only names are looked up
    config = options.ActionsConfig(
        agents={**dict.fromkeys(options.DEFAULT_AGENTS, spec), **dict.fromkeys(names["agents"],
                                                                                spec)},
        routines=dict.fromkeys(names["routines"], spec),
        channels={n: options.ChannelSpec(name=n)
                  for n in (options.LOG_CHANNEL, *names["channels"])})
    return functools.partial(references, config=config), out


def require_valid(cfg: Settings) -> None:
    """Refuse an invalid monitors.toml (``bound``'s problems) in one line.

    Raises:
        errors.ConfigError: ``monitors.toml:3:1: daemon.resyncc: unknown field
            'resyncc' (did you mean 'resync'?)``, naming how many more problems there are.
    """
    from reconciler import errors
    from reconciler.config import settings_check

    _, found = bound(cfg)
    line = settings_check.summary(found)
    if line is not None:
        raise errors.ConfigError(line)
