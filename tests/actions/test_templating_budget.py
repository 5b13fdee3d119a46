"""Render budgets: no template can wedge the process (time, steps, size, output)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

from reconciler import errors
from reconciler.actions import templating
from reconciler.state.store import Store
from tests.actions.conftest import event, fire, make_dispatcher, monitor, record

# The failing input of the bug report: a notify message that froze the daemon.
FREEZER = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}done"
# The same shape inside the range limit: only the step/time budget can stop it.
SPINNER = "{% for i in range(9999) %}{% for j in range(9999) %}{% endfor %}{% endfor %}done"


def _ctx() -> dict[str, object]:
    mon = monitor({"type": "notify"}, name="ci-red")
    return templating.context(mon, event(mon, "build 7 failed"))


def _fails(text: str, **kw: float) -> str:
    with pytest.raises(errors.ActionError) as info:
        templating.render(text, _ctx(), **kw)  # type: ignore[arg-type]
    return str(info.value)


def test_freezer_from_the_report_fails_fast_with_a_reason() -> None:
    started = time.monotonic()
    message = _fails(FREEZER)
    assert message.startswith("template: ") and "range()" in message
    assert time.monotonic() - started < 30  # bounded; it used to never return


def test_step_budget_stops_a_loop_inside_the_range_limit() -> None:
    message = _fails(SPINNER)
    assert "render budget exceeded" in message and "steps" in message


def test_deadline_stops_a_render() -> None:
    message = _fails(SPINNER, seconds=0.05, steps=10**12)
    assert "render budget exceeded" in message and "still running after" in message


def test_budget_holds_in_a_worker_thread_and_tracer_is_restored() -> None:
    outcome: list[str] = []

    def work() -> None:
        try:
            templating.render(SPINNER, _ctx())
        except errors.ActionError as e:
            outcome.append(str(e))

    before = sys.gettrace()
    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert not t.is_alive() and outcome and "budget" in outcome[0]
    assert templating.render("{event}", _ctx()) == "build 7 failed"
    assert sys.gettrace() is before


@pytest.mark.parametrize("text", [
    "{{ 'a' * 10**9 }}",
    "{{ 10**9 * [1] }}",
    "{{ 2 ** 100000 }}",
    "{{ 'a'|center(10**9) }}",
    "{{ 'a'.ljust(10**9) }}",
    "{{ 'a'.zfill(10**9) }}",
    "{{ '%999999999s' % 'a' }}",
    "{{ '%*s' % (10**9, 'a') }}",
    "{{ '%999999999s'|format('a') }}",
    "{{ '{:>999999999}'.format('a') }}",
    "{{ '{:>{}}'.format('a', 10**9) }}",
    "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% set ns = namespace(s='a') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
    "{% macro f(s, n) %}{{ f(s ~ s, n - 1) if n else s|length }}{% endmacro %}{{ f('a', 40) }}",
    "{% set l = [1] %}{% for i in range(40) %}{{ l.extend(l) }}{% endfor %}",
    "{{ ('a' * 1000)|replace('a', 'a' * 1000)|replace('a', 'a' * 1000) }}",
    "{{ ('a' * 1000).replace('a', 'a' * 1000).replace('a', 'a' * 1000) }}",
    "{{ 'x'|indent(10**9, true) }}",
    "{{ [1]|batch(10**9, 0)|list }}",
    "{% for i in range(10000) %}{% for j in range(10000) %}{{ 'x' * 100 }}{% endfor %}{% endfor %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
])
def test_amplifiers_are_refused(text: str) -> None:
    message = _fails(text)
    assert message.startswith("template: ")


def test_normal_templates_still_render() -> None:
    out = templating.render(
        "{{ monitor.name }}: {{ event }} [{{ groups | join(',') }}] {{ '%5s' | format(1) }}"
        " {{ '{:>4}'.format(2) }} {{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 'a' ~ 'b' }} {{ 7 % 3 }}"
        " {{ 'x' | center(5) }} {{ 'a\nb' | indent(2) }}"
        "{% for i in range(3) %}{{ i }}{% endfor %}", _ctx())
    assert out == "ci-red: build 7 failed [7]     1    2 ababab 1024 ab 1   x   a\n  b012"


def test_output_over_the_cap_is_refused() -> None:
    assert "output is over" in _fails(
        "{% for i in range(2000) %}{{ 'x' * 1000 }}{% endfor %}")


def test_freezer_in_a_notify_is_a_failed_dispatch_and_the_loop_stays_free(store: Store) -> None:
    mon = monitor({"type": "notify", "message": SPINNER}, name="spin")
    ev = event(mon)
    fire(store, mon, ev)
    ticks: list[float] = []

    async def go() -> None:
        d = make_dispatcher(store)

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        t = asyncio.ensure_future(ticker())
        started = time.monotonic()
        await d.dispatch(mon, ev)
        assert await d.drain(30)
        elapsed = time.monotonic() - started
        t.cancel()
        await d.close()
        # The render ran in a worker thread: the loop kept ticking meanwhile.
        assert len(ticks) >= min(5, int(elapsed / 0.05))

    asyncio.run(go())
    rec = record(store, mon, ev)
    assert rec["status"] == "failed"
    assert "template: render budget exceeded" in str(rec["reason"])
