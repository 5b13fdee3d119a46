"""Every configuration file is refused when another user could have written it
(``config.trust``, rule ``unsafe-permissions``): lint, plan and the daemon's start."""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.config import trust
from tests.conftest import Repo, run_cli

POLL = "source: {type: poll, command: [echo, hi], interval: 5s}\naction: {type: notify}\n"
RUN = ("source: {type: file, path: /etc/hostname}\n"
       "action: {type: run, command: [echo], prompt: '{{ event }}'}\n")
ROUTINE = "source: {type: file, path: /etc/hostname}\naction: {type: routine, routine: r}\n"
NOTIFY = "source: {type: file, path: /etc/hostname}\naction: {type: notify}\n"
NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _shared_group() -> int | None:
    """A group whose members are not only this user (group write there is unsafe)."""
    return next((g.gr_gid for g in grp.getgrall()
                 if not trust._private_group(g.gr_gid, os.geteuid())), None)


def _lint(repo: Repo) -> tuple[int, list[str]]:
    r = run_cli(["lint"], repo=repo)
    return r.exit_code, [line for line in r.output.splitlines() if "unsafe-permissions" in line]


@pytest.mark.parametrize("text", [POLL, RUN, ROUTINE], ids=["poll", "run", "routine"])
def test_world_writable_file_that_runs_commands_is_refused(repo: Repo, text: str) -> None:
    repo.write("monitors.toml", "[routines.r]\nargv = ['true']\n")
    path = repo.write("monitors.d/x.yml", text)
    assert _lint(repo) == (0, [])
    path.chmod(0o666)
    rc, lines = _lint(repo)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"{path}:1:1: error: refused this monitor file: monitors acts "
                               "on it as ")
    assert lines[0].endswith(f"the file is world-writable (mode 0666): chmod o-w {path} "
                             "[unsafe-permissions]")


def test_command_source_counts_too(repo: Repo) -> None:
    path = repo.write("monitors.d/x.yml", "source: {type: command, command: [echo, hi]}\n"
                                          "action: {type: notify}\n")
    path.chmod(0o646)
    assert "refused this monitor file" in _lint(repo)[1][0]


EXFIL = ("source: {type: file, path: /etc/shadow}\n"
         "action: {type: webhook-out, url: 'http://127.0.0.1:18765/exfil',"
         " headers: {X-Env: '${EXFILTOKEN}'}}\n")


@needs_root
def test_a_file_that_runs_nothing_is_judged_too(repo: Repo) -> None:
    """It reads and sends as root: a stranger's file would post /etc/shadow and a secret."""
    from reconciler import settings
    from reconciler.config import loader

    path = repo.write("monitors.d/x.yml", EXFIL)
    assert _lint(repo) == (0, [])
    os.chown(path, NOBODY, -1)
    path.chmod(0o666)
    rc, lines = _lint(repo)
    assert rc == 1 and len(lines) == 1 and "refused this monitor file" in lines[0], lines
    assert "x" in loader.load(settings.load(root=repo.root)).invalid  # so the daemon keeps out


def test_a_world_writable_overlay_is_refused_and_its_monitor_is_invalid(repo: Repo) -> None:
    from reconciler import settings
    from reconciler.config import loader

    repo.write("monitors.d/x.yml", NOTIFY)
    overlay = repo.write("monitors.d/overlays/x.yml", "monitor: x\npause: {reason: r}\n")
    assert _lint(repo) == (0, [])
    overlay.chmod(0o666)
    rc, lines = _lint(repo)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"{overlay}:1:1: error: refused this overlay: ")
    result = loader.load(settings.load(root=repo.root))
    assert "x" not in result.overlays and "x" in result.invalid  # neither paused nor resumed


@needs_root
def test_file_owned_by_another_user_is_refused(repo: Repo) -> None:
    path = repo.write("monitors.d/x.yml", POLL)
    os.chown(path, NOBODY, -1)
    rc, lines = _lint(repo)
    assert rc == 1 and f"is owned by uid {NOBODY}" in lines[0], lines
    os.chown(path, 0, -1)  # root-owned files are trusted whoever runs monitors
    assert _lint(repo) == (0, [])


def test_group_writable_file_is_refused_unless_the_group_is_the_owners_own(repo: Repo) -> None:
    path = repo.write("monitors.d/x.yml", POLL)
    path.chmod(0o664)
    others = _shared_group()
    own = pwd.getpwuid(os.geteuid()).pw_gid
    if others is None or os.geteuid() != 0:
        pytest.skip("needs root and a group shared with other users")
    os.chown(path, -1, others)
    rc, lines = _lint(repo)
    assert rc == 1 and "group-writable (mode 0664): chmod g-w" in lines[0], lines
    if not trust._private_group(own, os.geteuid()):
        pytest.skip("this user's primary group is not private (user private groups)")
    os.chown(path, -1, own)  # Debian's OpenSSH user-group-modes: the owner's own group
    assert _lint(repo) == (0, [])


@pytest.mark.parametrize("mode, refused", [(0o777, True), (0o775, True), (0o1777, False)])
def test_layer_directory_writable_by_others(repo: Repo, mode: int, refused: bool) -> None:
    repo.write("monitors.d/x.yml", POLL)
    repo.user.chmod(mode)
    if mode == 0o775:
        shared = _shared_group()
        if shared is None or os.geteuid() != 0:
            pytest.skip("needs root and a group shared with other users")
        os.chown(repo.user, -1, shared)
    rc, lines = _lint(repo)
    assert (rc == 1) is refused, lines
    if refused:
        assert f"directory {repo.user} is " in lines[0]


def test_repository_root_writable_by_others_is_refused(repo: Repo) -> None:
    repo.write("monitors.d/x.yml", POLL)
    repo.root.chmod(0o777)
    assert f"directory {repo.root} is world-writable" in _lint(repo)[1][0]


@needs_root
def test_layer_directory_owned_by_another_user_is_refused(repo: Repo) -> None:
    repo.write("monitors.d/x.yml", POLL)
    os.chown(repo.user, NOBODY, -1)
    assert f"{repo.user} is owned by uid {NOBODY}" in _lint(repo)[1][0]


def test_symlink_is_judged_by_its_target_and_the_targets_directory(repo: Repo,
                                                                   tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "real.yml"
    target.write_text(POLL)
    (repo.user / "x.yml").symlink_to(target)
    assert _lint(repo) == (0, [])
    target.chmod(0o666)
    assert "world-writable (mode 0666)" in _lint(repo)[1][0]
    target.chmod(0o644)
    elsewhere.chmod(0o777)  # anyone could replace the target
    assert f"directory {elsewhere} is world-writable" in _lint(repo)[1][0]


@needs_root
def test_symlinked_layer_whose_targets_grandparent_is_a_strangers_is_refused(
        repo: Repo, tmp_path: Path) -> None:
    grand = tmp_path / "grand"
    target = grand / "parent" / "layer"
    target.mkdir(parents=True)
    (target / "x.yml").write_text(POLL)
    shutil.rmtree(repo.user)
    repo.user.symlink_to(target)
    assert _lint(repo) == (0, [])
    os.chown(grand, NOBODY, -1)  # nobody may rename parent/ and put their own layer there
    assert f"directory {grand} is owned by uid {NOBODY}" in _lint(repo)[1][0]


@needs_root
def test_symlink_chain_through_a_strangers_directory_is_refused(repo: Repo,
                                                                tmp_path: Path) -> None:
    stranger, real = tmp_path / "stranger", tmp_path / "real"
    stranger.mkdir()
    real.mkdir()
    (real / "x.yml").write_text(POLL)
    (stranger / "hop.yml").symlink_to(real / "x.yml")
    (repo.user / "x.yml").symlink_to(stranger / "hop.yml")
    assert _lint(repo) == (0, [])
    os.chown(stranger, NOBODY, -1)  # nobody may point hop.yml anywhere
    assert f"directory {stranger} is owned by uid {NOBODY}" in _lint(repo)[1][0]


@needs_root
def test_symlinked_file_inside_the_repository_checks_the_directories_on_its_way(
        repo: Repo) -> None:
    shared = repo.root / "shared" / "deep"
    shared.mkdir(parents=True)
    (shared / "x.yml").write_text(POLL)
    (repo.user / "x.yml").symlink_to("../shared/deep/x.yml")
    assert _lint(repo) == (0, [])
    os.chown(repo.root / "shared", NOBODY, -1)
    assert f"directory {repo.root / 'shared'} is owned by uid {NOBODY}" in _lint(repo)[1][0]


def test_unsafe_file_is_invalid_for_the_loader(repo: Repo) -> None:
    from reconciler import settings
    from reconciler.config import loader

    repo.write("monitors.d/x.yml", POLL).chmod(0o666)
    result = loader.load(settings.load(root=repo.root))
    assert "x" not in result.monitors and "x" in result.invalid
    assert [p.rule for p in result.problems] == ["unsafe-permissions"]


AGENTS = "[agents.mine]\nargv = ['echo', '{prompt}']\n"


def test_world_writable_monitors_toml_with_agents_is_refused(repo: Repo) -> None:
    toml = repo.write("monitors.toml", AGENTS)
    repo.write("monitors.d/x.yml", NOTIFY)
    toml.chmod(0o666)
    expected = f"error: {toml}:1:1: refused this monitors.toml: monitors acts on it as "
    r = run_cli(["lint"], repo=repo)
    assert r.exit_code == 1 and r.output.startswith(expected), r.output
    assert r.output.rstrip().endswith("[unsafe-permissions]") and len(r.output.splitlines()) == 1
    plan = run_cli(["plan"], repo=repo)
    assert plan.exit_code == 1 and "refused this monitors.toml" in plan.output
    # the daemon does not start on it (one line, exit 1)
    p = subprocess.run([sys.executable, "-m", "reconciler", "--root", str(repo.root),
                        "--state-dir", str(repo.state), "--device", "test-box", "run"],
                       capture_output=True, text=True, timeout=60, cwd=repo.root)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "refused this monitors.toml" in p.stderr and "Traceback" not in p.stderr
    toml.chmod(0o644)
    assert run_cli(["lint"], repo=repo).exit_code == 0


@pytest.mark.parametrize("text", ["[system]\nurl = 'file:///tmp/evup'\n",
                                  "[layers]\nuser = 'elsewhere'\n", "stateDir = '/tmp/s'\n",
                                  "[daemon]\nresync = '30s'\n"],
                         ids=["system", "layers", "stateDir", "daemon"])
def test_world_writable_monitors_toml_is_refused_whatever_it_holds(repo: Repo,
                                                                   text: str) -> None:
    repo.write("monitors.toml", text).chmod(0o666)
    repo.write("monitors.d/x.yml", NOTIFY)
    for args in (["lint"], ["system", "pull"], ["list"]):
        r = run_cli(args, repo=repo)
        assert r.exit_code == 1 and "refused this monitors.toml" in r.output, (args, r.output)
    assert not (repo.root / "system" / "evil.yml").exists()


def test_world_writable_fleet_file_is_refused(repo: Repo) -> None:
    fleet = repo.write("fleet.yaml", "devices: [{name: test-box}]\n")
    repo.write("monitors.d/x.yml", NOTIFY)
    assert _lint(repo) == (0, [])
    fleet.chmod(0o666)
    rc, lines = _lint(repo)
    assert rc == 1 and len(lines) == 1 and "refused this fleet file" in lines[0], lines


def test_problem_names_nothing_for_a_safe_file(tmp_path: Path) -> None:
    path = tmp_path / "x.yml"
    path.write_text(POLL)
    path.chmod(0o644)
    assert trust.problem(path, root=tmp_path) is None
    assert trust.problem(tmp_path / "missing.yml", root=tmp_path) is None


def test_monitors_test_does_not_run_an_unsafe_file(repo: Repo) -> None:
    pwned = repo.root / "pwned"
    repo.write("monitors.d/x.yml", f"source: {{type: poll, command: [touch, {pwned}], "
                                   "interval: 5s}\naction: {type: notify}\n").chmod(0o666)
    r = run_cli(["test", "x"], repo=repo)
    assert r.exit_code == 1 and "unsafe-permissions" in r.output
    assert not pwned.exists()


def test_one_pass_stats_each_directory_once_and_refuses_every_file_under_a_bad_one(
        tmp_path: Path) -> None:
    root = tmp_path.resolve()
    layer = root / "monitors.d"
    layer.mkdir()
    files = [layer / f"m{i}.yml" for i in range(3)]
    for f in files:
        f.write_text(POLL)
        f.chmod(0o644)
    root.chmod(0o755)
    layer.chmod(0o755)
    seen: dict[str, str | None] = {}
    assert [trust.problem(f, root=root, seen=seen) for f in files] == [None] * 3
    assert seen == {str(root): None, str(layer): None}
    layer.chmod(0o777)
    assert trust.problem(files[0], root=root, seen=seen) is None  # the pass's answer
    seen = {}  # the next pass sees the change, for every file under it
    found = [trust.problem(f, root=root, seen=seen) for f in files]
    assert all(f is not None and f"directory {layer} is world-writable" in f for f in found)
    layer.chmod(0o755)


def test_a_pass_answers_every_file_as_a_lone_check_does(tmp_path: Path) -> None:
    """``Walks`` answers the second file of a directory from the first one's walk: the
    answers must be those of a walk of each file on its own, for plain files, files
    that are symbolic links (to a safe and to an unsafe place) and files reached
    through a linked directory."""
    root = tmp_path.resolve() / "repo"
    layer = root / "monitors.d"
    layer.mkdir(parents=True)
    outside = tmp_path.resolve() / "outside"
    (outside / "open").mkdir(parents=True)
    (outside / "open").chmod(0o777)  # not sticky: anyone may replace what is in it
    (outside / "shut").mkdir()
    (outside / "shut").chmod(0o755)
    for where in ("open", "shut"):
        (outside / where / "t.yml").write_text(POLL)
        (outside / where / "t.yml").chmod(0o644)
    (root / "linked").symlink_to(outside / "shut")
    for i in range(3):
        (layer / f"a{i}.yml").write_text(POLL)
        (layer / f"a{i}.yml").chmod(0o644)
    (layer / "to-open.yml").symlink_to(outside / "open" / "t.yml")
    (layer / "to-shut.yml").symlink_to(outside / "shut" / "t.yml")
    (layer / "a3.yml").write_text(POLL)
    (layer / "a3.yml").chmod(0o666)
    root.chmod(0o755)
    layer.chmod(0o755)
    tmp_path.chmod(0o755)
    files = [layer / n for n in ("a0.yml", "to-open.yml", "a1.yml", "to-shut.yml", "a2.yml",
                                 "a3.yml", "missing.yml")]
    files += [root / "linked" / "t.yml", root / "linked" / "t.yml"]
    alone = [trust.problem(f, root=root) for f in files]
    assert alone[0] is None and alone[1] is not None and alone[3] is None
    assert alone[5] is not None and "world-writable" in alone[5]
    walks, seen = trust.Walks(), dict[str, str | None]()
    assert [trust.problem(f, root=root, seen=seen, walks=walks) for f in files] == alone
    assert str(layer) in walks.parents  # the second file of the layer was answered from it
