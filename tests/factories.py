"""The test suite's one monitor factory.

A monitor starts as a schema-form document (``monitor_doc``: the mapping a user's YAML
file parses to, with a poll source and a notify action unless given); ``monitor`` turns
it into a resolved ``Monitor`` the way the loader does (``config.normalize.monitor``, so
its fingerprint and defaults are the real ones), and ``monitor_yaml`` writes it as the
text of a file for tests that hand a repository to the CLI or the daemon.

(tests/actions/conftest.py keeps its own ``monitor`` until that package's pending merge
lands; it should then call ``monitor`` here.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.config import normalize
from reconciler.model import Monitor, Pause, Scope

POLL: Mapping[str, Any] = {"type": "poll", "command": ["true"], "interval": "30s"}
NOTIFY: Mapping[str, Any] = {"type": "notify"}


def monitor_doc(source: Mapping[str, Any] | None = None, *,
                condition: Mapping[str, Any] | None = None,
                action: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A schema-form monitor document: ``source`` (default ``POLL``), ``condition`` (left
    out when None), ``action`` (default ``NOTIFY``) and any other top-level field given as
    a keyword in its schema spelling (``rateLimit={"max": 5, "per": "1m"}``, ``labels``)."""
    doc: dict[str, Any] = {"source": dict(source or POLL)}
    if condition is not None:
        doc["condition"] = dict(condition)
    doc["action"] = dict(action or NOTIFY)
    doc.update(extra)
    return doc


def monitor(source: Mapping[str, Any] | None = None, *, name: str = "m",
            condition: Mapping[str, Any] | None = None,
            action: Mapping[str, Any] | None = None, scope: Scope = Scope.USER,
            origin: Path | str = "", pause: Pause | None = None, overlay: Path | None = None,
            pin: Mapping[str, Any] | None = None, **extra: Any) -> Monitor:
    """A resolved ``Monitor`` named ``name`` from ``monitor_doc(source, condition=...,
    action=..., **extra)``, normalized as the loader does (the document must be
    schema-valid; a bad duration raises ``ValueError``). ``scope``, ``origin`` (the
    file), ``pause``, ``overlay`` and ``pin`` are what the loader adds beside the file's
    document (see ``config.normalize.monitor``). A whole document can be passed as
    ``monitor(**doc)``: its keys are the keywords."""
    doc = monitor_doc(source, condition=condition, action=action, **extra)
    return normalize.monitor(doc, name=name, scope=scope, origin=Path(origin), pause=pause,
                             overlay=overlay, pin=pin)


def monitor_yaml(name: str, command: str, *, interval: str = "1s", extra: str = "") -> str:
    """The YAML text of a monitor file: a poll source running ``command`` (YAML text: a
    flow list such as ``"[echo, hi]"``, or a shell string) every ``interval``, and a
    notify action whose message names the monitor; ``extra`` is YAML text appended as
    further top-level fields (``"condition:\\n  mode: every\\n"``)."""
    source = {"type": "poll", "command": yaml.safe_load(command), "interval": interval}
    action = {"type": "notify", "message": name + " saw {{ event }}"}
    doc = {"name": name, **monitor_doc(source, action=action)}
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000) + extra


class _Dumper(yaml.SafeDumper):
    """Mappings in block style, lists in flow style (``command: [echo, hi]``): the
    layout of a hand-written monitor file, so line numbers in findings stay put."""

    def represent_list(self, data: list[Any]) -> yaml.Node:
        return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)


_Dumper.add_representer(list, _Dumper.represent_list)


ECHO_MONITOR = """\
source:
  type: poll
  command: [echo, {word}]
  interval: 30s
action:
  type: notify
"""
"""A monitor file's text (no name: the file's stem names it) polling ``echo {word}``
every 30s and notifying: ``ECHO_MONITOR.format(word="alpha")``; distinct words give
distinct fingerprints."""


SECRET_HEADER_MONITOR = """
        name: hook
        source: {{type: poll, command: [echo, {word}], interval: 1s}}
        action:
          type: webhook-out
          url: https://example.invalid/h
          headers: {{Authorization: "Bearer ${{HOOK_TOKEN}}"}}
        """
"""The text of ``monitors.d/hook.yml`` for redaction tests: a webhook-out whose header
references ``${HOOK_TOKEN}`` (set it in the environment), polling ``echo {word}``:
``SECRET_HEADER_MONITOR.format(word="x")``."""
