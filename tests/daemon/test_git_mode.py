"""Git mode: the daemon runs what a commit of the followed ref holds, never the working
tree, records the revisions, and keeps the last applied commit when the ref is unusable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, read_json, wait_for
from tests.daemon.gitrepos import commit, git, init, monitor, push_from_elsewhere


def _git_status(repo: Repo) -> dict[str, Any]:
    doc = read_json(repo.state / "running.json") or {}
    return dict(doc.get("git") or {})


def test_runs_commits_of_a_local_ref_and_never_the_working_tree(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    first = commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    assert _git_status(repo)["lastAppliedRevision"] == first
    assert d.running()["a"]["revision"] == first
    repo.write("monitors.d/b.yml", monitor("b"))  # uncommitted: must not run
    second = commit(repo, "c", {"monitors.d/c.yml": monitor("c")})
    wait_for(lambda: "c" in d.running(), what="c running", log=d.log)
    assert "b" not in d.running()
    status = _git_status(repo)
    assert status["lastAppliedRevision"] == status["lastAttemptedRevision"] == second
    assert d.running()["c"]["revision"] == second
    assert d.running()["a"]["revision"] == first  # its running version came from there
    view = json.loads(d.cli("view", "a", "--json").stdout)
    assert view["revision"] == first and view["lastApplied"]["revision"] == first
    assert f"revision:    {first}" in d.cli("view", "a").stdout
    assert (repo.root / "monitors.d/b.yml").exists()  # the working tree is untouched
    rows = {r["name"]: r for r in json.loads(d.cli("list", "--json").stdout)["monitors"]}
    assert "b" not in rows  # list shows what runs: the applied commit
    assert rows["c"]["status"] == "running" and rows["c"]["origin"].endswith("monitors.d/c.yml")
    assert ".history" not in rows["c"]["origin"]
    assert "monitors.d/b.yml" in git(repo.root, "status", "--porcelain", "--untracked=all")


def test_an_invalid_commit_keeps_the_last_good_version_and_names_the_revision(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    commit(repo, "a", {"monitors.d/a.yml": monitor("a"), "monitors.d/b.yml": monitor("b")})
    d = daemons().start()
    wait_for(lambda: {"a", "b"} <= set(d.running()), what="a, b running", log=d.log)
    old = d.running()["a"]["fingerprint"]
    bad = commit(repo, "break a, change b", {"monitors.d/a.yml": "name: a\nsource: [\n",
                                             "monitors.d/b.yml": monitor("b", "there")})
    wait_for(lambda: d.running()["b"].get("revision") == bad, what="b replaced", log=d.log)
    assert d.running()["a"]["fingerprint"] == old
    assert d.running()["a"]["revision"] != bad
    status = d.cli("list", "--json")
    assert status.returncode in (0, 1), status.stderr
    problems = read_json(repo.state / "running.json")
    assert problems["git"]["lastAppliedRevision"] == bad
    wait_for(lambda: f"{bad[:12]}:monitors.d/a.yml" in d.log_text(),
             what="the error named with the revision", log=d.log)


def test_follows_a_force_push_and_keeps_the_last_commit_when_the_ref_is_deleted(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    origin = tmp_path / "origin.git"
    init(repo, origin=origin, toml='ref = "origin/main"\nfetch = "1s"\n')
    commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    doomed = commit(repo, "b", {"monitors.d/b.yml": monitor("b")})
    git(repo.root, "push", "-q", "origin", "main")
    d = daemons().start()
    wait_for(lambda: {"a", "b"} <= set(d.running()), what="a, b running", log=d.log)
    assert _git_status(repo)["lastAppliedRevision"] == doomed
    git(repo.root, "reset", "-q", "--hard", "HEAD~1")  # rewrite: b never happened
    rewritten = commit(repo, "c instead", {"monitors.d/c.yml": monitor("c")})
    git(repo.root, "push", "-q", "--force", "origin", "main")
    git(repo.root, "update-ref", "-d", "refs/remotes/origin/main")  # only the fetch knows
    wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == rewritten,
             what="the force-push followed", log=d.log)
    assert set(d.running()) == {"a", "c"}
    git(origin, "update-ref", "-d", "refs/heads/main")  # the followed branch is deleted
    wait_for(lambda: _git_status(repo).get("error"), what="the deleted ref reported",
             log=d.log)
    status = _git_status(repo)
    assert "origin/main" in status["error"]
    assert status["lastAppliedRevision"] == rewritten
    assert "[git] ref 'origin/main': no such branch" in d.log_text()
    assert "[git] [git]" not in d.log_text()  # the log line named its section twice
    assert set(d.running()) == {"a", "c"}
    listing = json.loads(d.cli("list", "--json").stdout)
    assert listing["daemon"]["git"]["lastAppliedRevision"] == rewritten
    assert "origin/main" in listing["daemon"]["git"]["error"]
    text = d.cli("status").stdout
    assert f"Following origin/main: applied {rewritten[:12]}" in text
    assert "git error: " in text


def test_a_failing_fetch_keeps_the_applied_commit_and_shows_the_error(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    origin = tmp_path / "origin.git"
    init(repo, origin=origin, toml='ref = "origin/main"\nfetch = "1s"\n')
    applied = commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    git(repo.root, "push", "-q", "origin", "main")
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    origin.rename(tmp_path / "gone.git")
    wait_for(lambda: "fetch failed" in str(_git_status(repo).get("error")),
             what="the fetch error", log=d.log)
    assert _git_status(repo)["lastAppliedRevision"] == applied
    assert "a" in d.running()


def test_plan_shows_the_working_tree_against_what_runs_and_plans_a_ref(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    applied = commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    git(repo.root, "branch", "feature")
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    repo.write("monitors.d/b.yml", monitor("b"))  # uncommitted: planned, not run
    plan = d.cli("plan")
    assert plan.returncode == 0, plan.stderr
    assert "+ b" in plan.stdout and f"applied {applied[:12]}" in plan.stdout
    doc = json.loads(d.cli("plan", "--json").stdout)
    assert doc["lastAppliedRevision"] == applied
    assert [c["name"] for c in doc["changes"] if c["action"] == "start"] == ["b"]
    git(repo.root, "checkout", "-q", "feature")
    later = commit(repo, "c on feature", {"monitors.d/c.yml": monitor("c")})
    git(repo.root, "checkout", "-q", "main")
    by_ref = json.loads(d.cli("plan", "--json", "--ref", "feature").stdout)
    assert by_ref["commit"] == later
    assert [c["name"] for c in by_ref["changes"] if c["action"] == "start"] == ["c"]
    missing = d.cli("plan", "--ref", "nope")
    assert missing.returncode == 1 and "nope" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert set(d.running()) == {"a"}


def test_export_and_plan_against_round_trip(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    applied = commit(repo, "a b", {"monitors.d/a.yml": monitor("a"),
                                   "monitors.d/b.yml": monitor("b")})
    d = daemons().start()
    wait_for(lambda: {"a", "b"} <= set(d.running()), what="a, b running", log=d.log)
    out = tmp_path / "edge.json"
    done = d.cli("status", "--export", str(out))
    assert done.returncode == 0, done.stderr
    exported = json.loads(out.read_text())
    assert exported["device"] == "test-box"
    assert exported["monitors"]["a"]["revision"] == applied
    assert exported["monitors"]["a"]["origin"] == "monitors.d/a.yml"
    assert "liveness" not in out.read_text() and "state" not in exported["monitors"]["a"]
    d.stop()
    # CI: another checkout, no daemon, no state: plan the pull request against the export
    ci = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(repo.root), str(ci))
    (ci / "monitors.d/b.yml").unlink()
    (ci / "monitors.d/c.yml").write_text(monitor("c"))
    (ci / "monitors.d/a.yml").write_text(monitor("a", "changed"))
    env_root = ["--root", str(ci), "--state-dir", str(tmp_path / "ci-state")]
    plan = d.cli(*env_root, "plan", "--json", "--against", str(out))
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    actions = {c["name"]: c["action"] for c in doc["changes"]}
    assert actions == {"a": "replace", "b": "stop", "c": "start"}
    assert doc["device"] == "test-box" and doc["lastAppliedRevision"] == applied
    same = json.loads(d.cli("plan", "--json", "--against", str(out)).stdout)
    assert not same["hasChanges"], same["summary"]
    text = d.cli(*env_root, "plan", "--against", str(out)).stdout
    assert f"Running state from {out}" in text
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = d.cli("plan", "--against", str(bad))
    assert refused.returncode != 0 and "status --export" in refused.stderr


def _signing_key(repo: Repo, tmp_path: Path) -> Path:
    """An ed25519 key made now (no agent, no passphrase); the clone signs with it and
    ``allowed_signers`` names it. Returns the allowed signers file."""
    import shutil
    import subprocess

    if shutil.which("ssh-keygen") is None:
        import pytest

        pytest.skip("ssh-keygen is not installed (openssh-client)")
    key = tmp_path / "signing"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(key)],
                   check=True, capture_output=True, timeout=30)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"t@example.invalid {(tmp_path / 'signing.pub').read_text().strip()}\n")
    git(repo.root, "config", "gpg.format", "ssh")
    git(repo.root, "config", "user.signingkey", str(key))
    return allowed


def test_verify_signed_applies_signed_commits_only(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    allowed = _signing_key(repo, tmp_path)
    repo.write("monitors.toml", f'[git]\nref = "main"\nverify = "signed"\n'
                                f'allowedSigners = "{allowed}"\n')
    repo.write("monitors.d/a.yml", monitor("a"))
    git(repo.root, "add", "monitors.d/a.yml")
    git(repo.root, "commit", "-q", "-S", "-m", "signed a")
    signed = git(repo.root, "rev-parse", "HEAD")
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    assert _git_status(repo)["lastAppliedRevision"] == signed
    unsigned = commit(repo, "unsigned b", {"monitors.d/b.yml": monitor("b")})
    wait_for(lambda: _git_status(repo).get("lastAttemptedRevision") == unsigned,
             what="the unsigned head seen", log=d.log)
    status = _git_status(repo)
    assert status["lastAppliedRevision"] == signed
    assert f"{unsigned[:12]} is not signed by an allowed key" in status["error"]
    assert set(d.running()) == {"a"}
    repo.write("monitors.d/c.yml", monitor("c"))
    git(repo.root, "add", "monitors.d/c.yml")
    git(repo.root, "commit", "-q", "-S", "-m", "signed c")
    again = git(repo.root, "rev-parse", "HEAD")
    wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == again,
             what="the signed head applied", log=d.log)
    assert set(d.running()) == {"a", "b", "c"}
    assert _git_status(repo)["error"] is None


def test_apply_fetches_and_reconciles_to_the_ref_at_once(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    origin = tmp_path / "origin.git"
    init(repo, origin=origin, toml='ref = "origin/main"\nfetch = "1h"\n')
    commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    git(repo.root, "push", "-q", "origin", "main")
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    pushed = push_from_elsewhere(tmp_path, origin, "b")
    done = d.cli("apply", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _git_status(repo)["lastAppliedRevision"] == pushed  # no wait: apply fetched
    assert "b" in d.running()


def test_a_restart_with_the_ref_deleted_keeps_the_last_applied_commit(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    git(repo.root, "checkout", "-q", "-b", "live")
    repo.write("monitors.toml", '[git]\nref = "live"\n')
    applied = commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    assert d.stop() == 0
    git(repo.root, "checkout", "-q", "main")
    git(repo.root, "branch", "-q", "-D", "live")
    again = daemons(log_name="second.log").start()
    wait_for(lambda: "a" in again.running() and _git_status(repo).get("error"),
             what="a running again, the deleted ref reported", log=again.log)
    status = _git_status(repo)
    assert status["lastAppliedRevision"] == applied and "'live'" in status["error"]


def test_a_channel_and_a_monitor_using_it_land_in_one_commit(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    commit(repo, "a", {"monitors.d/a.yml": monitor("a")})
    local = (repo.root / "monitors.toml").read_text()
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    uses = monitor("b").replace("type: notify\n", "type: notify\n  channel: team\n")
    assert "channel: team" in uses
    shared = '[channels.team]\nurl = "json://127.0.0.1:9/hook"\n'
    landed = commit(repo, "the team channel and b", {
        ".gitignore": ".history/\n", "monitors.toml": shared, "monitors.d/b.yml": uses})
    repo.write("monitors.toml", local)  # the device's own settings: not committed
    wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == landed,
             what="the commit applied", log=d.log)
    wait_for(lambda: "b" in d.running(), what="b running with the commit's channel",
             log=d.log)
    assert "unknown channel" not in d.log_text()


def test_a_url_is_followed_through_a_private_mirror_without_a_checkout(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    (work / "monitors.d").mkdir()
    (work / "monitors.d/a.yml").write_text(monitor("a"))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a")
    git(work, "push", "-q", "origin", "main")
    repo.write("monitors.toml", f'[git]\nurl = "{origin}"\nref = "main"\nfetch = "1s"\n')
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running from the mirror", log=d.log)
    (work / "monitors.d/b.yml").write_text(monitor("b"))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "b")
    pushed = git(work, "rev-parse", "HEAD")
    git(work, "push", "-q", "origin", "main")
    wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == pushed,
             what="the pushed commit applied", log=d.log)
    assert set(d.running()) == {"a", "b"}
    assert (repo.state / "git-mirror.git" / "HEAD").is_file()
    assert not (repo.root / ".git").exists()
    assert not (repo.user / "a.yml").exists()  # nothing was checked out


def test_the_mass_stop_guard_holds_a_commit_that_removes_everything(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    init(repo)
    commit(repo, "a b", {"monitors.d/a.yml": monitor("a"), "monitors.d/b.yml": monitor("b")})
    d = daemons().start()
    wait_for(lambda: {"a", "b"} <= set(d.running()), what="a, b running", log=d.log)
    emptied = commit(repo, "remove all", {"monitors.d/a.yml": None, "monitors.d/b.yml": None})
    wait_for(lambda: _git_status(repo).get("lastAttemptedRevision") == emptied,
             what="the commit seen", log=d.log)
    wait_for(lambda: (read_json(repo.state / "running.json") or {}).get("held"),
             what="the stops held", log=d.log)
    assert set(d.running()) == {"a", "b"}
    restored = commit(repo, "restore b", {"monitors.d/b.yml": monitor("b")})
    wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == restored
             and set(d.running()) == {"b"}, what="a stopped, b kept", log=d.log)


def test_verify_signed_with_a_gpg_keyring(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    import os
    import shutil
    import subprocess

    import pytest

    from tests.daemon.gitrepos import ENV

    if shutil.which("gpg") is None or shutil.which("gpgconf") is None:
        pytest.skip("gpg is not installed (gnupg)")
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = {**os.environ, **ENV, "GNUPGHOME": str(home)}
    subprocess.run(["gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
                    "--quick-gen-key", "t <t@example.invalid>", "ed25519", "sign", "never"],
                   env=env, check=True, capture_output=True, timeout=60)
    try:
        init(repo)
        repo.write("monitors.toml", f'[git]\nref = "main"\nverify = "signed"\n'
                                    f'gpgHome = "{home}"\n')
        repo.write("monitors.d/a.yml", monitor("a"))
        for args in (["add", "monitors.d/a.yml"], ["commit", "-q", "-S", "-m", "signed a"]):
            subprocess.run(["git", "-c", "user.signingkey=t@example.invalid", *args],
                           cwd=repo.root, env=env, check=True, capture_output=True,
                           timeout=60)
        signed = git(repo.root, "rev-parse", "HEAD")
        d = daemons().start()  # GNUPGHOME is not in its environment: only gpgHome says it
        wait_for(lambda: _git_status(repo).get("lastAppliedRevision") == signed,
                 what="the gpg-signed commit applied", log=d.log)
        unsigned = commit(repo, "unsigned b", {"monitors.d/b.yml": monitor("b")})
        wait_for(lambda: _git_status(repo).get("lastAttemptedRevision") == unsigned,
                 what="the unsigned head seen", log=d.log)
        assert _git_status(repo)["lastAppliedRevision"] == signed
        assert "not signed by an allowed key" in _git_status(repo)["error"]
        assert set(d.running()) == {"a"}
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False,
                       capture_output=True, timeout=30)


def test_a_fleet_files_ca_file_is_exported_with_the_commit(
        repo: Repo, tmp_path: Path, daemons: Callable[..., Daemon]) -> None:
    """``caFile`` is relative to the fleet file: in git mode that is the commit's tree,
    so the bundle is read from the commit too (else the fleet file is refused)."""
    from tests.helpers import self_signed

    cert, _ = self_signed(tmp_path / "pki")
    init(repo)
    fleet = ("devices:\n  - name: test-box\n  - name: nas\n"
             "    address: https://127.0.0.1:1\n    caFile: tls/fleet-ca.pem\n")
    head = commit(repo, "a, fleet", {"monitors.d/a.yml": monitor("a"), "fleet.yaml": fleet,
                                     "tls/fleet-ca.pem": cert.read_text()})
    d = daemons().start()
    wait_for(lambda: "a" in d.running(), what="a running", log=d.log)
    exported = repo.state / "git-trees" / head
    assert (exported / "tls" / "fleet-ca.pem").read_text() == cert.read_text()
