from __future__ import annotations

import pytest

from reconciler import errors
from reconciler.actions import templating
from tests.actions.conftest import event, monitor


def _ctx() -> dict[str, object]:
    mon = monitor({"type": "notify"}, name="ci-red", description="CI on main")
    return templating.context(mon, event(mon, "build 7 failed", observation="x fail y"))


def test_context_and_both_forms() -> None:
    ctx = _ctx()
    assert templating.render("{event}", ctx) == "build 7 failed"
    assert templating.render("{{ event }}", ctx) == "build 7 failed"
    out = templating.render(
        "{{ monitor.name }}|{{ monitor.description }}|{{ signature }}|{{ groups[0] }}|"
        "{{ observation }}|{{ firedAt[:2] }}", ctx)
    assert out == "ci-red|CI on main|sig-1|7|x fail y|20"
    # {{ event }} is not rewritten twice; literal braces elsewhere survive
    assert templating.render("{{ '{x}' }} {event}", ctx) == "{x} build 7 failed"


@pytest.mark.parametrize("text, fragment", [
    ("{{ nope }}", "'nope' is undefined"),
    ("{{ monitor.nope }}", "nope"),
    ("{% if %}", "template: line 1"),
    ("{{ ''.__class__.__mro__ }}", "template:"),
    ("{{ range(10**9) | list }}", "template:"),
])
def test_render_errors_are_action_errors(text: str, fragment: str) -> None:
    with pytest.raises(errors.ActionError) as e:
        templating.render(text, _ctx())
    assert fragment in str(e.value)


def test_event_text_is_data_not_template() -> None:
    mon = monitor({"type": "notify"})
    ctx = templating.context(mon, event(mon, "{{ 7*7 }} {% raw %}"))
    assert templating.render("got: {event}", ctx) == "got: {{ 7*7 }} {% raw %}"


def test_check() -> None:
    assert templating.check("{event} on {{ monitor.name }} {{ groups | join(',') }}") is None
    bad = templating.check("{{ evnt }}")
    assert bad is not None and "'evnt'" in bad and "known:" in bad
    syntax = templating.check("{{ event ")
    assert syntax is not None and syntax.startswith("template syntax error at line 1")
