"""End to end: the real daemon as a subprocess on a temp repository (DESIGN.md §3.6-§3.7)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.factories import monitor_yaml


def test_add_edit_break_delete(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/base.yml", monitor_yaml("base", "[echo, base]"))
    d = daemons().start()
    wait_for(lambda: "base" in d.running(), what="base running", log=d.log)

    # add a file -> started, and it really polls
    repo.write("monitors.d/watched.yml", monitor_yaml("watched", "[echo, one]"))
    wait_for(lambda: "watched" in d.running(), what="watched started", log=d.log)
    wait_for(lambda: "first poll ok: watched" in d.log_text(), what="first poll", log=d.log)
    first_fp = d.running()["watched"]["fingerprint"]
    wait_for(lambda: d.state("watched").get("fingerprint") == first_fp, what="baseline",
             log=d.log)

    # edit the condition -> replaced, with a new baseline under the new fingerprint
    repo.write("monitors.d/watched.yml", monitor_yaml(
        "watched", "[echo, one]", extra="condition:\n  mode: match\n  match: 'o(n)e'\n"))
    wait_for(lambda: d.running().get("watched", {}).get("fingerprint") not in (None, first_fp),
             what="replace", log=d.log)
    new_fp = d.running()["watched"]["fingerprint"]
    wait_for(lambda: d.state("watched").get("fingerprint") == new_fp, what="new baseline",
             log=d.log)
    assert "replace watched: fingerprint changed: new baseline" in d.log_text()
    assert "condition.mode: 'on-change' -> 'match'" in d.log_text()

    # break the YAML -> the old version keeps running; the error shows in plan and list
    repo.write("monitors.d/watched.yml", "name: watched\nsource: [unclosed\n")
    wait_for(lambda: "keep watched" in d.log_text(), what="keep logged", log=d.log)
    assert d.running()["watched"]["fingerprint"] == new_fp
    plan = d.cli("plan")
    # a file with an error makes plan exit 1 (Terraform), after printing the whole plan
    assert plan.returncode == 1, plan.stderr
    assert "! watched is kept at its last applied version" in plan.stdout
    assert "watched.yml:" in plan.stdout and "error" in plan.stdout
    assert "No changes." in plan.stdout and "1 file has errors" in plan.stdout
    listing = d.cli("list", "--json")
    row = next(r for r in json.loads(listing.stdout)["monitors"] if r["name"] == "watched")
    assert row["status"] == "kept (file invalid)" and "watched.yml" in row["error"]
    text_list = d.cli("list").stdout
    assert "file error:" in text_list

    # delete it -> stopped
    (repo.user / "watched.yml").unlink()
    wait_for(lambda: "watched" not in d.running(), what="stop", log=d.log)
    assert "stop watched: removed file monitors.d/watched.yml" in d.log_text()
    assert set(d.running()) == {"base"}
    assert d.stop() == 0
    doc = read_json(repo.state / "running.json")
    assert doc["daemon"]["running"] is False
    assert not (repo.state / "control.sock").exists()


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=root, check=True, capture_output=True, timeout=30)


def test_git_checkout_reconciles_to_the_branch(repo: Repo,
                                               daemons: Callable[..., Daemon]) -> None:
    _git(repo.root, "init", "-q", "-b", "main")
    (repo.root / ".gitignore").write_text(".history/\n")
    for name in ("alpha", "beta", "gamma"):
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]"))
    _git(repo.root, "add", "-A")
    _git(repo.root, "commit", "-qm", "main set")
    _git(repo.root, "checkout", "-q", "-b", "other")
    (repo.user / "gamma.yml").unlink()
    repo.write("monitors.d/delta.yml", monitor_yaml("delta", "[echo, delta]"))
    repo.write("monitors.d/beta.yml", monitor_yaml("beta", "[echo, beta-two]"))
    _git(repo.root, "add", "-A")
    _git(repo.root, "commit", "-qm", "other set")
    _git(repo.root, "checkout", "-q", "main")

    d = daemons().start()
    wait_for(lambda: set(d.running()) == {"alpha", "beta", "gamma"}, what="main set", log=d.log)
    main_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.root, text=True,
                               capture_output=True, check=True).stdout.strip()
    assert read_json(repo.state / "running.json")["revision"]["commit"] == main_head
    beta_fp = d.running()["beta"]["fingerprint"]

    _git(repo.root, "checkout", "-q", "other")
    wait_for(lambda: set(d.running()) == {"alpha", "beta", "delta"}, what="other set",
             log=d.log)
    wait_for(lambda: d.running()["beta"]["fingerprint"] != beta_fp, what="beta replaced",
             log=d.log)
    other_head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.root, text=True,
                                capture_output=True, check=True).stdout.strip()
    wait_for(lambda: (read_json(repo.state / "running.json") or {}).get("revision", {})
             .get("commit") == other_head, what="applied commit recorded", log=d.log)
    assert d.stop() == 0


def test_second_daemon_refuses_with_exit_2(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/one.yml", monitor_yaml("one", "[echo, one]"))
    first = daemons().start()
    assert first.proc is not None
    second = first.cli("run", timeout=30)
    assert second.returncode == 2
    assert f"locked by pid {first.proc.pid}" in second.stderr
    assert first.proc.poll() is None
    assert first.stop(signal.SIGINT) == 0
    # the lock is released: a new daemon starts
    again = daemons(log_name="again.log").start()
    assert again.stop() == 0


def test_control_socket_is_private_and_answers(repo: Repo,
                                               daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/one.yml", monitor_yaml("one", "[echo, one]"))
    d = daemons().start()
    from reconciler.client import control as client
    from reconciler.daemon import protocol

    sock = Path(protocol.connect_path(repo.state))
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    status = client.status(repo.state)
    assert status is not None
    assert status["running"] == ["one"] and status["device"] == "test-box"
    result = client.evaluate_now(repo.state, protocol.EvaluateNow(names=("one",)), timeout=30)
    assert result["results"]["one"]["status"] == "ok"
    wait_for(lambda: d.liveness("one").get("checkCount", 0) >= 1, what="poll", log=d.log)
    assert d.stop() == 0


def test_sigkill_while_firing_then_restart(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    value = repo.root / "value.txt"
    value.write_text("v0\n")
    repo.write("monitors.d/counter.yml", monitor_yaml(
        "counter", f"[cat, {value}]", interval="500ms"))
    repo.write("monitors.d/slow-run.yml", (
        f"source:\n  type: poll\n  command: [cat, {value}, {value}]\n  interval: 500ms\n"
        "action:\n  type: run\n  command: [sleep, '12']\n  prompt: '{{ event }}'\n"))
    d = daemons().start()
    wait_for(lambda: d.state("counter").get("baseline") or d.state("counter").get(
        "lastSignature"), what="baseline", log=d.log)
    for i in range(1, 6):
        value.write_text(f"v{i}\n")
        wait_for(lambda i=i: len(d.fires("counter")) >= i, what=f"fire {i}", log=d.log)
    wait_for(lambda: any(f.get("status") == "dispatched" for f in d.fires("slow-run")),
             what="a run in flight", log=d.log)
    value.write_text("v6\n")
    assert d.proc is not None
    os.kill(d.proc.pid, signal.SIGKILL)
    d.proc.wait(timeout=10)

    # no torn files: every JSON record under the state dir parses
    for path in repo.state.rglob("*.json"):
        assert read_json(path) is not None, f"torn record {path}"
    before = {f["event"]["signature"] for f in d.fires("counter")}

    again = daemons(log_name="again.log").start()
    wait_for(lambda: "first poll ok: counter" in again.log_text(), what="poll after restart",
             log=again.log)
    wait_for(lambda: "v6" in {f["event"]["signature"].strip() for f in again.fires("counter")},
             what="v6 fired once", log=again.log)
    # three more polls, now, through the control API; then count: every value fired once
    from reconciler.client import control as client
    from reconciler.daemon import protocol

    for _ in range(3):
        polled = client.evaluate_now(repo.state, protocol.EvaluateNow(names=("counter",)),
                                     timeout=30)
        assert polled["results"]["counter"]["status"] == "ok"
    signatures = [f["event"]["signature"].strip() for f in again.fires("counter")]
    assert sorted(signatures) == sorted(set(signatures)), signatures
    assert {s.strip() for s in before} <= set(signatures)
    # pending or dispatched notify fires were re-sent (at-least-once), none left unfinished
    wait_for(lambda: all(f.get("status") in ("succeeded", "failed", "interrupted", "skipped")
                         for f in again.fires("counter")), what="no unfinished fire",
             log=again.log)
    # the run that was in flight at the kill is interrupted, never re-spawned (at-most-once)
    interrupted = [f for f in again.fires("slow-run") if f.get("status") == "interrupted"]
    assert interrupted, again.fires("slow-run")
    assert "not re-spawned" in interrupted[0].get("reason", "")
    assert again.stop() == 0


def test_run_once_carries_state_over(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    value = repo.root / "value.txt"
    value.write_text("a\n")
    repo.write("monitors.d/file-watch.yml", monitor_yaml("file-watch", f"[cat, {value}]",
                                                         interval="30s"))
    d = daemons()
    first = d.cli("run", "--once", "--wait", "20s")
    assert first.returncode == 0, first.stderr
    assert "polled file-watch" in first.stderr
    assert d.fires("file-watch") == []
    value.write_text("b\n")
    second = d.cli("run", "--once", "--wait", "20s")
    assert second.returncode == 0, second.stderr
    assert "NOTIFY file-watch: file-watch saw b" in second.stderr
    fires = d.fires("file-watch")
    assert len(fires) == 1 and fires[0]["status"] == "succeeded"
    third = d.cli("run", "--once", "--wait", "20s")
    assert third.returncode == 0 and len(d.fires("file-watch")) == 1

    # the operator views read what the runs left behind
    listing = json.loads(d.cli("list", "--json").stdout)
    [row] = listing["monitors"]
    assert row["name"] == "file-watch" and row["status"] == "not running"
    assert row["liveness"]["checkCount"] == 3 and row["fires"] == 1
    assert "checked 3x" in row["livenessText"] and "fired 1x" in row["livenessText"]
    view = d.cli("view", "file-watch")
    assert view.returncode == 0
    assert "fingerprint: sha256:" in view.stdout and "succeeded" in view.stdout
    assert "baseline:" in view.stdout
    runs = d.cli("runs", "file-watch", "--json")
    assert [r["status"] for r in json.loads(runs.stdout)] == ["succeeded"]
    logs = d.cli("logs", "file-watch")
    assert 'channels: ["log"]' in logs.stdout
    missing = d.cli("view", "no-such")
    assert missing.returncode == 1 and "no monitor named 'no-such'" in missing.stderr


def test_mass_stop_is_held_by_daemon_and_refused_by_apply(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    names = [f"m{i}" for i in range(6)]
    for name in names:
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]",
                                                         interval="5s"))
    d = daemons().start()
    wait_for(lambda: set(d.running()) == set(names), what="all running", log=d.log)
    for name in names[:4]:
        (repo.user / f"{name}.yml").unlink()
    repo.write("monitors.d/extra.yml", monitor_yaml("extra", "[echo, extra]", interval="5s"))
    wait_for(lambda: "HELD 4 stops" in d.log_text(), what="held", log=d.log)
    # the stops are held; the independent start still happened
    wait_for(lambda: set(d.running()) == {*names, "extra"}, what="extra started", log=d.log)
    listing = json.loads(d.cli("list", "--json").stdout)
    status = listing["daemon"]["held"]
    assert {h["name"] for h in status} == set(names[:4])
    # list says what is true: the held ones still run
    rows = {r["name"]: r["status"] for r in listing["monitors"]}
    assert rows["m0"] == "removed (stop HELD: still running)" and rows["m4"] == "running"
    plan = d.cli("plan", "--detailed-exitcode")
    assert plan.returncode == 2
    assert "HELD by the mass-stop guard" in plan.stdout
    refused = d.cli("apply", "--yes")
    assert refused.returncode == 1
    assert "mass-stop guard" in refused.stderr
    ok = d.cli("apply", "--yes", "--allow-mass-stop", "--wait", "10s")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert set(d.running()) == {"m4", "m5", "extra"}
    assert "stopped  m0" in ok.stdout
    assert d.stop() == 0


def test_apply_starts_daemon_and_reports_first_polls(repo: Repo) -> None:
    from tests.daemon.conftest import Daemon as D

    repo.write("monitors.d/good.yml", monitor_yaml("good", "[echo, fine]"))
    repo.write("monitors.d/bad.yml", monitor_yaml("bad", "[/nonexistent/binary-xyz]"))
    helper = D(repo)
    plan = helper.cli("plan", "--out", str(repo.root / "plan.json"))
    assert plan.returncode == 0
    assert "The daemon is not running" in plan.stdout
    saved = json.loads((repo.root / "plan.json").read_text())
    assert saved["version"] == 1 and saved["generation"] == 0 and saved["digest"]
    try:
        applied = helper.cli("apply", "--yes", "--wait", "15s", str(repo.root / "plan.json"))
        assert "Started the daemon" in applied.stdout, applied.stdout + applied.stderr
        assert "ok       good" in applied.stdout
        assert "failed   bad" in applied.stdout
        assert applied.returncode == 1
        assert (repo.state / "daemon.log").exists()
        # the saved plan is stale now: the running generation moved
        stale = helper.cli("apply", "--yes", str(repo.root / "plan.json"))
        assert stale.returncode == 1
        assert "stale" in stale.stderr and "generation changed from 0" in stale.stderr
    finally:
        pid = int((repo.state / "daemon.lock").read_text().strip() or 0)
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not _alive(pid), what="detached daemon exit")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of a detached child is reaped by init; treat "Z" as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_last_known_good_survives_a_restart(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/lkg.yml", monitor_yaml("lkg", "[echo, lkg]"))
    repo.write("monitors.d/other.yml", monitor_yaml("other", "[echo, other]"))
    d = daemons().start()
    wait_for(lambda: "lkg" in d.running(), what="lkg running", log=d.log)
    fp = d.running()["lkg"]["fingerprint"]
    assert d.stop() == 0
    repo.write("monitors.d/lkg.yml", "name: lkg\nsource:\n  type: poll\n  command: [echo]\n")
    plan = d.cli("plan")
    assert "+ lkg will be started: file is invalid: starting its last applied valid version" \
        in plan.stdout
    again = daemons(log_name="again.log").start()
    wait_for(lambda: again.running().get("lkg", {}).get("fingerprint") == fp,
             what="last applied version started", log=again.log)
    wait_for(lambda: again.liveness("lkg").get("checkCount", 0) >= 1, what="polled",
             log=again.log)
    assert again.stop() == 0


# Files that raised inside the loader or the validator (issue 9 §1): an explicit core tag
# on a value not of its type, and nesting deep enough for the validator's recursion limit.
POISON = {
    "int-tag": "labels: {a: !!int }\n",
    "float-tag": "labels: {a: !<tag:yaml.org,2002:float> x}\n",
    "deep": "labels: {a: " + "[" * 300 + "]" * 300 + "}\n",
}


def test_poison_files_never_take_the_good_ones_down(repo: Repo,
                                                     daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/good.yml", monitor_yaml("good", "[echo, good]"))
    for name, text in POISON.items():
        repo.write(f"monitors.d/{name}.yml", monitor_yaml(name, f"[echo, {name}]", extra=text))
    d = daemons().start()  # `monitors run` starts beside them
    wait_for(lambda: "first poll ok: good" in d.log_text(), what="good polled", log=d.log)
    assert set(d.running()) == {"good"}
    # the daemon keeps reconciling: a new good file starts, a poisoned edit keeps the old one
    repo.write("monitors.d/later.yml", monitor_yaml("later", "[echo, later]"))
    wait_for(lambda: "later" in d.running(), what="later started", log=d.log)
    repo.write("monitors.d/good.yml", monitor_yaml("good", "[echo, good]", extra=POISON["deep"]))
    wait_for(lambda: "keep good" in d.log_text(), what="good kept", log=d.log)
    assert "reconcile failed" not in d.log_text()
    for args, code in ((["lint"], 1), (["plan"], 1), (["list"], 0), (["test", "later"], 0)):
        out = d.cli(*args)
        assert out.returncode == code, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
    lint = d.cli("lint").stdout
    for name in POISON:
        assert f"monitors.d/{name}.yml:9:" in lint, lint
    assert d.stop() == 0


SITECUSTOMIZE = '''
from reconciler.config import validate

_real = validate.check


def check(doc, *args, **kwargs):
    if doc.file.endswith("poison.yml"):
        raise RuntimeError("injected fault\\nsecond line")
    return _real(doc, *args, **kwargs)


validate.check = check
'''


def test_a_file_whose_check_raises_is_its_own_error_everywhere(
        repo: Repo, daemons: Callable[..., Daemon], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault injection: validate.check raises for one file in the daemon and in every
    command (a sitecustomize on PYTHONPATH); that file is an internal-error, the rest runs."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(hook))
    repo.write("monitors.d/good.yml", monitor_yaml("good", "[echo, good]"))
    repo.write("monitors.d/poison.yml", monitor_yaml("poison", "[echo, poison]"))
    d = daemons().start()
    wait_for(lambda: "first poll ok: good" in d.log_text(), what="good polled", log=d.log)
    assert set(d.running()) == {"good"}
    repo.write("monitors.d/later.yml", monitor_yaml("later", "[echo, later]"))
    wait_for(lambda: "later" in d.running(), what="later started", log=d.log)
    assert "reconcile failed" not in d.log_text()
    expected = ("monitors.d/poison.yml:1:1: error: internal error: RuntimeError: injected "
                "fault (please report this: the other files are not affected) [internal-error]")
    for args, code in ((["lint"], 1), (["plan"], 1), (["list"], 0), (["view", "good"], 0),
                       (["test", "later"], 0)):
        out = d.cli(*args)
        assert out.returncode == code, (args, out.stdout, out.stderr)
        assert "Traceback" not in out.stdout + out.stderr
        if args[0] in ("lint", "plan"):
            assert expected in out.stdout, out.stdout
    assert d.stop() == 0
