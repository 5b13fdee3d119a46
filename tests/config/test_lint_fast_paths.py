"""Lint's shortcuts give the answers of the libraries they stand in for.

``config.semantic`` accepts a subset of templates without loading Jinja2; this
subset must never accept what Jinja2 rejects, nor hide an unknown name. The
action references lint checks are ``actions.checks.references`` (one copy of the
rules), importable without Jinja2.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from jinja2 import TemplateSyntaxError, meta
from jinja2.sandbox import SandboxedEnvironment

from reconciler import templates
from reconciler.actions import checks, options
from reconciler.config import semantic
from tests.conftest import Repo

TEMPLATES = [
    "plain text", "{event}", "{{ event }}", "{{event}}", "{{ monitor.name }}", "x { y } }} %}",
    "trailing {", "{{ a. }}", "{{ event. }}", "{{ event }", "{{ true }}", "{{ evnt }}",
    "{{ event | upper }}", "{# note #}{{ event }}",
    "{% if observation %}exited: {{ observation }}{% endif %}",
    "{%if event%}a{%else%}b{%endif%}",
    "{% if monitor.name %}{{ monitor.name }}{% else %}-{% endif %} / {% if event %}e{% endif %}",
    "{% if event %}\n{{ groups }}\n{% endif %}",
    "{% if event %}a", "{% endif %}", "{% else %}", "{% if event %}a{% endif %",
    "{% if event %}a{% else %}b{% else %}c{% endif %}",
    "{% if event %}{% if event %}a{% endif %}{% endif %}", "{% if not event %}a{% endif %}",
    "{%- if event %}a{% endif %}", "{% if evnt %}a{% endif %}", "{% if in %}a{% endif %}",
    "{% if event.1 %}a{% endif %}", "{% for g in groups %}{{ g }}{% endfor %}",
]


def _jinja_verdict(text: str) -> str | None:
    """What Jinja2 itself says: None (valid, context names only), "syntax" or "unknown"."""
    try:
        names = meta.find_undeclared_variables(
            SandboxedEnvironment().parse(templates.expand_short_form(text)))
    except TemplateSyntaxError:
        return "syntax"
    return "unknown" if names - templates.CONTEXT_NAMES else None


@pytest.mark.parametrize("text", TEMPLATES)
def test_template_check_agrees_with_jinja2(text: str) -> None:
    found = semantic.template_error.__wrapped__(text)
    verdict = _jinja_verdict(text)
    assert (found is None) == (verdict is None), (found, verdict)
    if verdict == "unknown":
        assert found is not None and found.startswith("unknown variable")


def test_dangling_dot_is_a_template_error() -> None:
    # Once accepted without Jinja2 ({{ event. }} fails to render).
    assert semantic.template_error("{{ event. }}") == "expected name or number"


def test_action_references_are_one_set_of_rules() -> None:
    cfg = options.parse({"routines": {"deploy": {"argv": ["make"]}}})
    for action in ({"type": "run", "agent": "gpt9", "prompt": "{{ evnt }}"},
                   {"type": "routine", "routine": "nope"},
                   {"type": "notify", "channel": "pager"},
                   {"type": "run", "command": ["x", "-m{prompt}"]}, {"type": "run"}):
        refs = checks.references(action, cfg)
        assert refs and all(pair in checks.problems(action, cfg) for pair in refs)
    assert checks.references({"type": "run", "prompt": "{{ evnt }}", "agent": "claude"},
                             cfg) == []


def test_checks_module_loads_jinja2_only_for_templates() -> None:
    code = (
        "import sys\n"
        "from reconciler.actions import checks\n"
        "print(checks.references({'type': 'run', 'agent': 'x'}, None), 'jinja2' in sys.modules)\n"
        "print(checks.problems({'type': 'notify', 'message': '{{ evnt }}'})[0][0],"
        " 'jinja2' in sys.modules, checks.templating.__name__)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines() == [
        "[] False", "action.message True reconciler.actions.templating"], p.stderr


def test_lint_with_conditional_templates_and_references_loads_no_jinja2(repo: Repo) -> None:
    (repo.root / "monitors.toml").write_text('[routines.triage]\nargv = ["echo", "{prompt}"]\n')
    repo.write("monitors.d/pid.yml", """
        source: {type: pid, pid: 1}
        action:
          type: routine
          routine: triage
          prompt: "{% if observation %}exited: {{ observation }}{% else %}{event}{% endif %}"
        """)
    repo.write("monitors.d/host.yml",
               "source: {type: file, path: /etc/hostname}\n"
               "action: {type: notify, message: '{{ monitor.name }}: {event}'}\n")
    code = (
        "import sys\n"
        "from reconciler.cli import main\n"
        f"rc = main.run(['--root', {str(repo.root)!r}, 'lint'])\n"
        "heavy = {'httpx', 'asyncio', 'jinja2', 'jsonschema', 'difflib'}\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr


@pytest.mark.parametrize("text", [
    "", "~", "null", "Null", "true", "yes", "No", "on", "OFF", "y", "n", "0", "0777", "0x1F",
    "0b101", "-12", "+1_000", "1:30", "1:30:00", "1.5", "-.inf", ".NaN", "6.02e+23", "1e5",
    "2026-01-01", "2026-01-01T10:00:00Z", "<<", "=", "!x", "&a", "*a", "plain", "42abc",
    "-", "- x", ".", "0.", "._", "Yes-please", "nothing", "off-peak", "12:30pm",
])
def test_scalar_resolution_matches_pyyaml(text: str) -> None:
    import yaml
    from yaml.resolver import Resolver

    from reconciler.config import yamlnodes

    loader = yamlnodes.Loader("")
    try:
        for implicit in ((True, False), (False, True)):
            assert loader.resolve(yaml.ScalarNode, text, implicit) == Resolver().resolve(
                yaml.ScalarNode, text, implicit)  # type: ignore[no-untyped-call]
        for kind in (yaml.MappingNode, yaml.SequenceNode):
            assert loader.resolve(kind, None, (True, False)) == Resolver().resolve(
                kind, None, (True, False))  # type: ignore[no-untyped-call]
    finally:
        loader.dispose()


def test_lint_with_settings_and_fleet_loads_no_jsonschema_and_no_apprise(repo: Repo) -> None:
    """monitors.toml and fleet.yaml are checked by the compiled validator; Apprise is
    imported only when a channel is configured."""
    (repo.root / "monitors.toml").write_text('[daemon]\nresync = "30s"\n')
    repo.write("fleet.yaml", "devices:\n  - {name: test-box, interactive: true}\n")
    repo.write("monitors.d/host.yml", "source: {type: file, path: /etc/hostname}\n"
                                      "action: {type: notify}\ndevice: test-box\n")
    code = (
        "import sys\n"
        "from reconciler.cli import main\n"
        f"rc = main.run(['--root', {str(repo.root)!r}, 'lint'])\n"
        "heavy = {'jsonschema', 'apprise'}\n"
        "print(rc, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr
    (repo.root / "monitors.toml").write_text('[channels.x]\nurl = "json://127.0.0.1:9/"\n')
    env = {**os.environ, "XDG_CACHE_HOME": str(repo.root.parent / "cache")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.stdout.strip().splitlines()[-1] == "0 ['apprise']", p.stdout + p.stderr
    # the answer is cached (by a digest of the URL): the next lint does not load Apprise
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr
    assert "127.0.0.1" not in (repo.root.parent / "cache/monitors/channel-urls.json").read_text()
