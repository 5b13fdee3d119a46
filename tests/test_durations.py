"""``reconciler.durations``: the grammar and the one place where durations and times are bounded."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from reconciler import durations
from tests.conftest import Repo, run_cli


@pytest.mark.parametrize(("text", "seconds"), [
    ("500ms", 0.5), ("30s", 30.0), ("1h30m", 5400.0), ("45", 45.0), (7, 7.0),
    ("3650d", durations.MAX_SECONDS), ("521w3d", durations.MAX_SECONDS),
])
def test_parse_accepts_up_to_the_bound(text: object, seconds: float) -> None:
    assert durations.parse(text) == seconds


@pytest.mark.parametrize("value", [
    "3651d", "3000000w", "99999999999w", "9" * 5000, "9" * 5000 + "s", 10**30,
    "1ms" + "3650d",
])
def test_parse_refuses_past_the_bound_naming_it(value: object) -> None:
    with pytest.raises(durations.OutOfRange) as e:
        durations.parse(value)
    assert "longer than 3650d, the longest duration accepted" in str(e.value)
    assert len(str(e.value)) < 120  # a long input is shortened, never echoed whole


@pytest.mark.parametrize("value", ["²", "٣s", "1.5s", True, -1, "", "1y"])
def test_parse_refuses_non_durations_with_a_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        durations.parse(value)


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59-12:00", "9000-01-01T00:00:01Z",
                                  "9999-12-31T23:59:59+00:00"])
def test_check_time_refuses_past_latest(text: str) -> None:
    moment = dt.datetime.fromisoformat(text)
    with pytest.raises(durations.OutOfRange, match=r"later than 9000-01-01T00:00:00Z"):
        durations.check_time(moment, text)


def test_check_time_returns_utc() -> None:
    moment = dt.datetime.fromisoformat("2026-12-01T09:00:00+02:00")
    assert durations.check_time(moment, "x") == dt.datetime(2026, 12, 1, 7, tzinfo=dt.UTC)


# -- the same bounds as the files see them: one problem with its position, never exit 3 --

FIELDS = {  # every duration field of the monitor schema, by source or action type
    "source.interval": "source: {type: file, path: /etc/hostname, interval: %s}\n"
                       "action: {type: notify}\n",
    "source.timeout": "source: {type: poll, command: date, interval: 5s, timeout: %s}\n"
                      "action: {type: notify}\n",
    "source.backoff": "source: {type: command, command: date, backoff: %s}\n"
                      "action: {type: notify}\n",
    "action.timeout": "source: {type: file, path: /etc/hostname}\n"
                      "action: {type: webhook-out, url: 'http://127.0.0.1:9/', timeout: %s}\n",
    "action.maxTime": "source: {type: file, path: /etc/hostname}\n"
                      "action: {type: webhook-out, url: 'http://127.0.0.1:9/', maxTime: %s}\n",
    "rateLimit.per": "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
                     "rateLimit: {max: 1, per: %s}\n",
}


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("value", ["99999999999w", "1" + "0" * 30])
def test_every_duration_field_is_bounded_at_lint(repo: Repo, field: str, value: str) -> None:
    repo.write("monitors.d/m.yml", FIELDS[field] % value)
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1, r.output
    problems = [line for line in r.stdout.splitlines() if ": error: " in line]
    assert len(problems) == 1, r.output
    assert re.match(rf".*m\.yml:\d+:\d+: error: {re.escape(field)}: .* is (longer than 3650d|"
                    r"outside 500ms\.\.7d)", problems[0]), problems[0]


def test_overlay_until_is_bounded_at_lint(repo: Repo) -> None:
    repo.write("monitors.d/m.yml", FIELDS["rateLimit.per"] % "1m")
    repo.write("monitors.d/overlays/m.yml",
               "monitor: m\npause:\n  reason: r\n  until: '9999-12-31T23:59:59-12:00'\n")
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1, r.output
    assert "overlays/m.yml:4:10: error: pause.until: '9999-12-31T23:59:59-12:00' is later " \
           "than 9000-01-01T00:00:00Z, the latest time accepted [bad-until]" in r.stdout


def test_overlay_until_is_bounded_on_the_early_side_at_lint(repo: Repo) -> None:
    repo.write("monitors.d/m.yml", FIELDS["rateLimit.per"] % "1m")
    repo.write("monitors.d/overlays/m.yml",
               "monitor: m\npause:\n  reason: r\n  until: '0001-01-01T00:00:00+14:00'\n")
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1, r.output
    assert "overlays/m.yml:4:10: error: pause.until: '0001-01-01T00:00:00+14:00' is earlier " \
           "than 1970-01-01T00:00:00Z, the earliest time accepted [bad-until]" in r.stdout


def test_settings_durations_are_bounded(repo: Repo) -> None:
    repo.write("monitors.toml", '[agents.a]\nargv = ["echo", "{prompt}"]\ntimeout = "3000000w"\n')
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1, r.output
    assert "agents.a.timeout: '3000000w' is longer than 3650d" in r.stdout
