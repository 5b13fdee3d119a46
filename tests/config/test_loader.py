"""The layered loader: shadowing, overlays, duplicates, invalid files, digest."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler import settings
from reconciler.config import lint, loader, overlays
from reconciler.model import Pause, Scope, Severity
from tests.conftest import Repo

DISK = """
description: disk headroom
source: {type: poll, command: df -h /, interval: 5m}
condition: {mode: match, match: '9[0-9]%'}
action: {type: notify, message: "disk: {event}"}
"""
HOST = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def load(repo: Repo, now: datetime = NOW) -> loader.LoadResult:
    return loader.load(settings.load(root=repo.root), now=now)


def rules(result: loader.LoadResult) -> list[tuple[str, int, str]]:
    return [(Path(p.file).name, p.line, p.rule) for p in result.problems]


def test_empty_repository(repo: Repo) -> None:
    result = load(repo)
    assert result.monitors == {} and result.problems == [] and result.files == 0
    assert result.digest.startswith("sha256:")


def test_resolved_monitor_carries_scope_origin_fingerprint(repo: Repo) -> None:
    sys_path = repo.write("system/disk.yml", DISK)
    user_path = repo.write("monitors.d/host.yaml", HOST)
    result = load(repo)
    assert result.problems == [] and result.files == 2
    disk, host = result.monitors["disk"], result.monitors["host"]  # type: ignore[index]
    assert (disk.scope, disk.origin, disk.description) == (Scope.SYSTEM, sys_path,
                                                           "disk headroom")
    assert (host.scope, host.origin) == (Scope.USER, user_path)
    assert disk.fingerprint != host.fingerprint
    assert disk.source.interval == 300.0


def test_disabled_monitors_are_included(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", "enabled: false\n" + HOST)
    result = load(repo)
    assert result.monitors["host"].enabled is False  # type: ignore[index]


def test_redundant_shadow_is_info(repo: Repo) -> None:
    system = repo.write("system/disk.yml", DISK)
    user = repo.write("monitors.d/disk.yml", DISK.replace("disk headroom", "my copy")
                      .replace("5m", "300s"))
    result = load(repo)
    shadow = result.shadowed["disk"]  # type: ignore[index]
    assert (shadow.user_file, shadow.system_file, shadow.same_behaviour) == (user, system, True)
    assert result.monitors["disk"].scope is Scope.USER  # type: ignore[index]
    [problem] = result.problems
    assert (problem.rule, problem.severity) == ("shadowed-redundant", Severity.INFO)
    assert "delete" in problem.message and result.errors == 0


def test_diverged_shadow_names_what_differs(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK)
    repo.write("monitors.d/disk.yml", DISK.replace("5m", "10m") + "device: box-1\n")
    result = load(repo)
    assert result.shadowed["disk"].same_behaviour is False  # type: ignore[index]
    [problem] = result.problems
    assert problem.rule == "shadowed-diverged"
    assert "source" in problem.message and "device" in problem.message
    assert "upstream" in problem.message


def test_invalid_user_copy_does_not_fall_back_to_builtin(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK)
    bad = repo.write("monitors.d/disk.yml", "source: {type: poll}\naction: {type: notify}\n")
    result = load(repo)
    assert "disk" not in result.monitors
    assert result.invalid == {"disk": bad}


def test_invalid_file_is_listed_by_stem(repo: Repo) -> None:
    bad = repo.write("monitors.d/broken.yml", "source: [\n")
    repo.write("monitors.d/host.yml", HOST)
    result = load(repo)
    assert result.invalid == {"broken": bad}
    assert set(result.monitors) == {"host"}
    assert rules(result) == [("broken.yml", 2, "yaml-syntax")]


def test_same_name_twice_in_a_layer(repo: Repo) -> None:
    first = repo.write("monitors.d/host.yaml", HOST)
    second = repo.write("monitors.d/host.yml", HOST.replace("hostname", "hosts"))
    result = load(repo)
    [problem] = result.problems
    assert (Path(problem.file).name, problem.rule) == ("host.yml", "duplicate-name")
    assert str(first) in problem.message
    assert "host" not in result.monitors and result.invalid["host"] == second  # type: ignore[index]


def test_duplicate_fingerprint_across_layers_names_both_files(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK)
    repo.write("monitors.d/my-disk.yml", DISK.replace("5m", "300s"))
    result = load(repo)
    dups = [p for p in result.problems if p.rule == "duplicate-fingerprint"]
    assert {Path(p.file).name for p in dups} == {"disk.yml", "my-disk.yml"}
    mine = next(p for p in dups if p.file.endswith("my-disk.yml"))
    assert "system/disk.yml" in mine.message and mine.line == 2
    assert mine.severity is Severity.ERROR


def test_allow_duplicate_on_either_side_silences(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK)
    repo.write("monitors.d/my-disk.yml", "allowDuplicate: true\n" + DISK)
    assert [p for p in load(repo).problems if p.rule == "duplicate-fingerprint"] == []


def test_pause_overlay_applies_and_pin_replaces_placement(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK + "device: box-1\n")
    ovl = repo.write("monitors.d/overlays/disk.yml", """
        # written by: monitors pause
        monitor: disk
        pause: {reason: noisy, until: "2026-07-01T00:00:00Z", author: me}
        pin: {devices: [box-2, box-3]}
        """)
    result = load(repo)
    assert result.problems == []
    disk = result.monitors["disk"]  # type: ignore[index]
    assert disk.pause == Pause(reason="noisy", until="2026-07-01T00:00:00Z", author="me")
    assert disk.overlay == ovl and not disk.active
    assert (disk.device, disk.devices) == (None, ("box-2", "box-3"))
    assert disk.scope is Scope.SYSTEM  # a paused built-in stays the built-in
    assert result.overlays["disk"].pin == {"devices": ["box-2", "box-3"]}  # type: ignore[index]


def test_expired_pause_is_not_applied_and_warns(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    repo.write("monitors.d/overlays/host.yml",
               "monitor: host\npause:\n  reason: x\n  until: 2026-01-01T00:00:00+00:00\n")
    result = load(repo)
    assert result.monitors["host"].pause is None  # type: ignore[index]
    assert rules(result) == [("host.yml", 4, "overlay-expired")]
    assert result.problems[0].severity is Severity.WARNING
    # before expiry it applies
    early = load(repo, now=datetime(2025, 12, 31, tzinfo=UTC))
    assert early.monitors["host"].pause is not None  # type: ignore[index]


def test_is_expired() -> None:
    assert overlays.is_expired(Pause(until="2026-06-01T11:59:59Z"), NOW)
    assert not overlays.is_expired(Pause(until="2026-06-01T14:00:00+01:00"), NOW)
    assert overlays.is_expired(Pause(until="2026-06-01T12:30:00+01:00"), NOW)
    assert not overlays.is_expired(Pause(until="2026-06-02"), NOW)
    assert overlays.is_expired(Pause(until="2026-06-01"), NOW)
    assert not overlays.is_expired(Pause(until=None), NOW)
    assert not overlays.is_expired(Pause(until="garbage"), NOW)


def test_orphan_overlay_is_an_error_with_suggestion(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    repo.write("monitors.d/overlays/hots.yml", "monitor: hots\npause: {}\n")
    result = load(repo)
    [problem] = result.problems
    assert problem.rule == "overlay-orphan" and "did you mean 'host'" in problem.message


def test_overlay_checks(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    repo.write("monitors.d/overlays/host.yml", "monitor: other\npin: {device: a}\n")
    repo.write("monitors.d/overlays/x.yml", "monitor: x\n")
    repo.write("monitors.d/overlays/y.yml", "monitor: y\npin: {}\n")
    repo.write("monitors.d/overlays/z.yml", "monitor: z\npause: {until: next week}\n")
    found = rules(load(repo))
    assert ("host.yml", 1, "name-mismatch") in found
    assert ("x.yml", 1, "schema") in found  # neither pause nor pin
    assert ("y.yml", 2, "schema") in found  # pin without device(s)
    assert ("z.yml", 2, "bad-until") in found


def test_an_overlay_value_refused_for_its_tag_is_that_error_only(repo: Repo) -> None:
    """``until: !!bool x`` was both ``yaml-tag`` and ``bad-until``; README says only
    the tag error is shown."""
    repo.write("monitors.d/host.yml", HOST)
    repo.write("monitors.d/overlays/host.yml", "monitor: host\npause: {until: !!bool x}\n")
    result = load(repo)
    assert rules(result) == [("host.yml", 2, "yaml-tag")]
    assert "host" not in result.monitors


def test_broken_overlay_keeps_monitor_out_of_the_desired_set(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    bad = repo.write("monitors.d/overlays/host.yml", "monitor: host\npause: yes\n")
    result = load(repo)
    assert "host" not in result.monitors and result.invalid == {"host": bad}


def test_overlay_read_api(repo: Repo) -> None:
    path = repo.write("monitors.d/overlays/host.yml", "monitor: host\npin: {device: box-9}\n")
    overlay, problems = overlays.read(path)
    assert problems == [] and overlay is not None
    assert (overlay.monitor, overlay.path, overlay.pause, overlay.pin) == (
        "host", path, None, {"device": "box-9"})


def test_digest_changes_with_any_file(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    first = load(repo).digest
    assert load(repo).digest == first
    repo.write("monitors.d/overlays/host.yml", "monitor: host\npause: {}\n")
    second = load(repo).digest
    repo.write("system/disk.yml", DISK)
    third = load(repo).digest
    assert len({first, second, third}) == 3


def test_paths_mode_reads_exactly_those(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", HOST)
    other = repo.write("elsewhere/one.yml", HOST.replace("hostname", "hosts"))
    result = loader.load(settings.load(root=repo.root), paths=[other])
    assert set(result.monitors) == {"one"} and result.files == 1


def test_lint_paths_keep_layer_context(repo: Repo) -> None:
    repo.write("system/disk.yml", DISK)
    mine = repo.write("monitors.d/my-disk.yml", DISK)
    repo.write("monitors.d/broken.yml", "nope: [\n")
    ovl = repo.write("monitors.d/overlays/disk.yml", "monitor: disk\npause: {}\n")
    cfg = settings.load(root=repo.root)
    report = lint.run(cfg, [mine, ovl])
    # duplicate found against the built-in, the overlay is not an orphan, and the
    # broken file that was not asked about is not reported
    assert [p.rule for p in report.problems] == ["duplicate-fingerprint"]
    assert report.monitors == 1 and report.failed()
    full = lint.run(cfg)
    assert full.monitors == 3 and full.errors == 3


def test_lint_missing_path(repo: Repo) -> None:
    report = lint.run(settings.load(root=repo.root), [repo.root / "nope.yml"])
    assert [p.rule for p in report.problems] == ["unreadable"]


def test_strict_fails_on_warnings(repo: Repo) -> None:
    repo.write("monitors.d/host.yml", "enabled: yes\n" + HOST)
    report = lint.run(settings.load(root=repo.root))
    assert (report.errors, report.warnings) == (0, 1)
    assert not report.failed() and report.failed(strict=True)


def test_layers_from_monitors_toml(repo: Repo) -> None:
    (repo.root / "monitors.toml").write_text('[layers]\nuser = "mine"\nsystem = "builtin"\n')
    repo.write("mine/host.yml", HOST)
    repo.write("builtin/disk.yml", DISK)
    repo.write("monitors.d/ignored.yml", "garbage: [\n")
    result = load(repo)
    assert set(result.monitors) == {"host", "disk"} and result.problems == []


def test_worker_processes_give_the_same_result(repo: Repo) -> None:
    for i in range(40):
        repo.write(f"monitors.d/m{i:02d}.yml", HOST.replace("hostname", f"h{i % 30}"))
    repo.write("monitors.d/bad.yml", "source: {type: poll}\naction: {type: notify}\n")
    repo.write("system/disk.yml", DISK)
    cfg = settings.load(root=repo.root)
    serial = loader.load(cfg, now=NOW, jobs=1)
    parallel = loader.load(cfg, now=NOW, jobs=2)
    assert serial.errors > 0
    assert parallel.problems == serial.problems
    assert parallel.monitors == serial.monitors
    assert (parallel.digest, parallel.invalid, parallel.files) == (
        serial.digest, serial.invalid, serial.files)


# One file can never take the others down (issue 9 §1): the two classes of input that
# raised inside the loader or the validator, and any exception at all, become that
# file's problem while every other file loads.
POISON = {
    "int-tag.yml": "labels: {a: !!int }\n" + HOST,
    "float-tag.yml": "labels: {a: !<tag:yaml.org,2002:float> x}\n" + HOST,
    "deep.yml": "labels: {a: " + "[" * 300 + "]" * 300 + "}\n" + HOST,
}


def test_poison_files_are_their_own_errors(repo: Repo) -> None:
    for name, text in POISON.items():
        repo.write(f"monitors.d/{name}", text.replace("hostname", name))
    repo.write("monitors.d/host.yml", HOST)
    result = load(repo)
    assert set(result.monitors) == {"host"}
    assert set(result.invalid) == {"int-tag", "float-tag", "deep"}
    assert sorted(rules(result)) == [("deep.yml", 1, "yaml-depth"),
                                     ("float-tag.yml", 1, "yaml-tag"),
                                     ("int-tag.yml", 1, "yaml-tag")]


def _raise_for(stem: str, real: Any) -> Any:
    def check(doc: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(doc.file).stem == stem:
            raise RuntimeError("boom\nsecond line")
        return real(doc, *args, **kwargs)
    return check


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_in_one_file_is_that_files_internal_error(
        repo: Repo, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    from reconciler.config import validate

    monkeypatch.setattr(validate, "check", _raise_for("bad", validate.check))
    bad = repo.write("monitors.d/bad.yml", HOST.replace("hostname", "other"))
    repo.write("monitors.d/host.yml", HOST)
    result = loader.load(settings.load(root=repo.root), now=NOW, jobs=jobs)
    assert set(result.monitors) == {"host"} and result.invalid == {"bad": bad}
    [problem] = result.problems
    assert (Path(problem.file).name, problem.line, problem.col, problem.rule) == (
        "bad.yml", 1, 1, "internal-error")
    assert problem.message == ("internal error: RuntimeError: boom (please report this: "
                               "the other files are not affected)")


def test_an_exception_in_one_overlay_is_that_files_internal_error(
        repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overlays, "from_document",
                        _raise_for("host", overlays.from_document))
    repo.write("monitors.d/host.yml", HOST)
    repo.write("monitors.d/disk.yml", DISK)
    repo.write("monitors.d/overlays/host.yml", "monitor: host\npause: {reason: x}\n")
    repo.write("monitors.d/overlays/disk.yml", "monitor: disk\npause: {reason: x}\n")
    result = load(repo)
    assert rules(result) == [("host.yml", 1, "internal-error")]
    assert result.monitors["disk"].pause is not None  # type: ignore[index]
    # a broken pause must not silently resume: the monitor is invalid, not unpaused
    assert "host" not in result.monitors and "host" in result.invalid


def test_semantic_checks_run_beside_schema_errors(repo: Repo) -> None:
    """A schema error does not hide the regex, template, duration and URL checks of the
    fields that are themselves valid: one run reports every independent problem."""
    repo.write("monitors.d/many.yml", """
        source: {type: poll-http, url: "http://h:99999/", interval: 30s, bogus: 1}
        condition: {mode: match, match: "fail(", dedupeKey: "(x", ignore: ["[a"]}
        action: {type: notify, message: "{{ nope }}"}
        rateLimit: {max: 5, per: 2x}
        labels: [not, a, mapping]
    """)
    found = sorted(rules(load(repo)))
    assert found == [("many.yml", 1, "bad-url"), ("many.yml", 1, "unknown-field"),
                     ("many.yml", 2, "bad-regex"), ("many.yml", 2, "bad-regex"),
                     ("many.yml", 2, "bad-regex"), ("many.yml", 3, "bad-template"),
                     ("many.yml", 4, "bad-duration"), ("many.yml", 5, "schema")]


def test_semantic_checks_skip_fields_that_are_already_wrong(repo: Repo) -> None:
    # ignore is not a list (schema error): its items are not also reported as regexes
    repo.write("monitors.d/one.yml", """
        source: {type: poll, command: date, interval: 30s}
        condition: {ignore: 5}
        action: {type: notify, message: "{{ event }}"}
    """)
    repo.write("monitors.d/two.yml", """
        source: {type: poll, command: date, interval: 30s}
        condition: {ignore: "(["}
        action: {type: notify}
    """)
    assert sorted(rules(load(repo))) == [("one.yml", 2, "schema"), ("two.yml", 2, "schema")]


def test_action_references_are_checked_beside_schema_errors(repo: Repo) -> None:
    repo.write("monitors.toml", "[channels.ops]\nurl = 'json://localhost'\n")
    repo.write("monitors.d/ref.yml", """
        source: {type: poll, command: date, interval: 30s, bogus: 1}
        action: {type: notify, channel: opz}
    """)
    from reconciler.actions import checks

    cfg = settings.load(root=repo.root)
    check, problems = checks.bound(cfg)
    assert problems == []
    result = loader.load(cfg, now=NOW, action_check=check)
    assert sorted(rules(result)) == [("ref.yml", 1, "unknown-field"),
                                     ("ref.yml", 2, "unknown-reference")]


@pytest.mark.parametrize("interval", ["9" * 400, '"' + "9" * 400 + 's"', '"' + "9" * 400 + '"',
                                      "1" + "0" * 5000])
def test_a_duration_too_large_for_a_float_is_a_problem(repo: Repo, interval: str) -> None:
    repo.write("monitors.d/big.yml", "source: {type: poll, command: date, interval: "
               f"{interval}}}\naction: {{type: notify}}\n")
    assert rules(load(repo)) == [("big.yml", 1, "bad-duration")]
