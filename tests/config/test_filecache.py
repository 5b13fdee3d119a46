"""The cache of per-file check results (``config.filecache``): a hit gives the bytes a
miss gives, an entry is never used once anything it depends on changed, and the cache
is safe to delete, corrupt or leave unwritable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.config import filecache, monitorfile
from tests.conftest import Repo, run_cli

TOML = '[agents.claude]\nargv = ["claude", "-p", "{prompt}"]\n\n[channels.ops]\n' \
       'url = "json://127.0.0.1:9/hook"\n'

FILES = {
    "monitors.d/ci.yml": "source: {type: poll, command: [gh, pr, checks], interval: 30s}\n"
                         "condition: {mode: match, match: 'fail|error'}\n"
                         "action: {type: run, agent: claude, prompt: 'fix {event}'}\n"
                         "device: elsewhere\n",
    "monitors.d/health.yml": "source: {type: poll-http, url: 'https://x.example/h'}\n"
                             "action: {type: notify, channel: ops, message: '{{ event }}'}\n"
                             "devices: [a, b]\n",
    "monitors.d/typo.yml": "source: {type: poll, command: date, intervl: 30s}\n"
                           "action: {type: notify}\n",
    "monitors.d/yes.yml": "enabled: yes\nsource: {type: file, path: /etc/hostname}\n"
                          "action: {type: notify}\n",
    "monitors.d/broken.yml": "source: [unclosed\n",
    "monitors.d/same-1.yml": "source: {type: file, path: /etc/motd}\naction: {type: notify}\n",
    "monitors.d/same-2.yml": "source: {type: file, path: /etc/motd}\naction: {type: notify}\n",
    "monitors.d/agent.yml": "source: {type: pid, pid: 1}\naction: {type: run, agent: nobody, "
                            "prompt: x}\n",
    "system/disk.yml": "source: {type: poll, command: df -h /, interval: 5m}\n"
                       "action: {type: notify}\n",
    "monitors.d/overlays/disk.yml": "monitor: disk\npause: {reason: noisy}\n",
}


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files checked from their bytes (cache misses), by name."""
    calls: list[str] = []
    real = monitorfile.check_batch

    def spy(pairs: list[tuple[tuple[Path, str, str], bytes]],
            action_check: object = None) -> object:
        calls.extend(item[0].name for item, _ in pairs)
        return real(pairs, action_check)  # type: ignore[arg-type]

    monkeypatch.setattr(monitorfile, "check_batch", spy)
    return calls


def _repo(repo: Repo) -> Repo:
    (repo.root / "monitors.toml").write_text(TOML)
    for rel, text in FILES.items():
        repo.write(rel, text)
    return repo


def _outputs(repo: Repo, *extra: str) -> list[str]:
    return [run_cli(["lint", *extra, *fmt], repo=repo).output
            for fmt in ([], ["--format", "json"], ["--format", "github"])]


def test_hits_print_the_bytes_misses_print(repo: Repo, checked: list[str]) -> None:
    _repo(repo)
    uncached = _outputs(repo, "--no-cache")
    assert not filecache.path(repo.state).exists()
    assert len(checked) == 3 * 9
    checked.clear()
    cold = _outputs(repo)
    assert filecache.path(repo.state).exists() and len(checked) == 9  # then all hits
    checked.clear()
    warm = _outputs(repo)
    assert checked == []
    assert cold == warm == uncached
    assert "unknown agent 'nobody'" in warm[0] and "intervl" in warm[0]
    assert "device 'elsewhere'" in warm[0] and "[duplicate-fingerprint]" in warm[0]
    plan = run_cli(["plan", "--json"], repo=repo)
    assert checked == [] and "broken" in plan.stdout
    filecache.path(repo.state).unlink()
    again = run_cli(["plan", "--json"], repo=repo).stdout
    assert _undated(again) == _undated(plan.stdout) and len(checked) == 9


def _undated(plan_json: str) -> str:
    """The plan's JSON text without its ``createdAt`` value."""
    import json

    return plan_json.replace(json.loads(plan_json)["createdAt"], "")


def test_a_changed_file_is_checked_again(repo: Repo, checked: list[str]) -> None:
    _repo(repo)
    run_cli(["lint"], repo=repo)
    checked.clear()
    repo.write("monitors.d/typo.yml", FILES["monitors.d/typo.yml"].replace("intervl", "interval"))
    r = run_cli(["lint"], repo=repo)
    assert checked == ["typo.yml"] and "intervl" not in r.output
    assert r.output == run_cli(["lint", "--no-cache"], repo=repo).output


def test_monitors_toml_is_part_of_the_key(repo: Repo, checked: list[str]) -> None:
    _repo(repo)
    assert "unknown agent 'nobody'" in run_cli(["lint"], repo=repo).output
    (repo.root / "monitors.toml").write_text(TOML + '\n[agents.nobody]\nargv = ["x", "{prompt}"]\n')
    checked.clear()
    r = run_cli(["lint"], repo=repo)
    assert "unknown agent" not in r.output and len(checked) == 9


def test_another_version_of_the_code_starts_afresh(repo: Repo, checked: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _repo(repo)
    run_cli(["lint"], repo=repo)
    monkeypatch.setattr(filecache, "code_stamp", lambda: b"an edited rule")
    checked.clear()
    run_cli(["lint"], repo=repo)
    assert len(checked) == 9


def test_the_code_stamp_follows_the_package_files(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    schema = tmp_path / "schemas" / "monitor.schema.json"
    schema.write_text("{}")
    (tmp_path / "rules.py").write_text("X = 1\n")
    (tmp_path / "notes.txt").write_text("not code")
    first = filecache.code_stamp(tmp_path)
    assert first == filecache.code_stamp(tmp_path) != filecache.code_stamp()
    (tmp_path / "notes.txt").write_text("still not code")
    assert filecache.code_stamp(tmp_path) == first
    st = os.stat(schema)
    os.utime(schema, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    second = filecache.code_stamp(tmp_path)
    assert second != first
    (tmp_path / "rules.py").write_text("X = 2\n")  # same size, maybe the same mtime
    os.utime(tmp_path / "rules.py", ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000))
    assert filecache.code_stamp(tmp_path) != second


@pytest.mark.parametrize("damage", ["delete", "corrupt", "truncate", "world-writable",
                                    "writable directory", "writable state directory"])
def test_a_damaged_cache_is_ignored(repo: Repo, checked: list[str], damage: str) -> None:
    _repo(repo)
    first = run_cli(["lint"], repo=repo).output
    cache = filecache.path(repo.state)
    if damage == "delete":
        cache.unlink()
    elif damage == "corrupt":
        cache.write_bytes(b"not a pickle")
    elif damage == "truncate":
        cache.write_bytes(cache.read_bytes()[:100])
    elif damage == "world-writable":
        cache.chmod(0o666)
    elif damage == "writable directory":
        cache.parent.chmod(0o777)
    else:
        repo.state.chmod(0o777)
    checked.clear()
    assert run_cli(["lint"], repo=repo).output == first
    assert len(checked) == 9


def test_an_unwritable_state_directory_is_no_error(repo: Repo, tmp_path: Path,
                                                   checked: list[str]) -> None:
    _repo(repo)
    below_a_file = tmp_path / "a-file"
    below_a_file.write_text("")
    r = run_cli(["--root", str(repo.root), "--state-dir", str(below_a_file / "state"), "lint"])
    assert r.exit_code == 1 and "error: " not in r.stderr
    assert r.output.replace(str(below_a_file / "state"), "") == \
        run_cli(["lint", "--no-cache"], repo=repo).output


def test_lint_outside_a_repository_writes_no_cache(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "one.yml").write_text(FILES["monitors.d/yes.yml"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MONITORS_ROOT", raising=False)
    r = run_cli(["lint", "one.yml"])
    assert "[yaml11-bool]" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.yml"]


def test_a_hit_gives_the_values_a_miss_gives(repo: Repo, checked: list[str]) -> None:
    """Entries hold frozen slots dataclasses (a monitor, its specs, problems) stored by
    ``filecache._Pickler`` as class and field values: read back, they equal what
    checking the files gives, type for type."""
    from reconciler import settings
    from reconciler.config import loader

    _repo(repo)
    cfg = settings.load(root=repo.root)
    missed = loader.load(cfg, cache=repo.state)
    checked.clear()
    hit = loader.load(cfg, cache=repo.state)
    assert checked == [] and hit.monitors and hit.problems
    assert hit.monitors == missed.monitors and hit.problems == missed.problems
    assert hit.positions == missed.positions
    for name, monitor in hit.monitors.items():
        assert type(monitor.source) is type(missed.monitors[name].source)
        assert monitor.fingerprint == missed.monitors[name].fingerprint
