"""An invalid monitors.toml or fleet file stops plan and the daemon in one positioned line.

The real daemon runs as a subprocess (``Daemon.cli``); it must exit 1 at start,
before taking the state lock, with ``file:line:col: field: message``.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon
from tests.factories import monitor_yaml

TYPOS = 'devce = "x"\n[daemon]\nresyncc = "10s"\n[agentz.foo]\nargv = ["a"]\n'


def test_plan_refuses_a_monitors_toml_with_unknown_keys(repo: Repo,
                                                        daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "echo hi"))
    (repo.root / "monitors.toml").write_text(TYPOS)
    r = daemons().cli("plan")
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line == ("error: monitors.toml:1:1: devce: unknown field 'devce' (did you mean "
                    "'device'?) (and 2 more; `monitors lint` lists them) (the daemon does not "
                    "start with an invalid monitors.toml; fix it)")


def test_the_daemon_refuses_to_start_with_unknown_keys(repo: Repo,
                                                       daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "echo hi"))
    (repo.root / "monitors.toml").write_text("[daemon]\nresyncc = '10s'\n")
    r = daemons().cli("run", "--once", timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip() == ("error: monitors.toml:2:1: daemon.resyncc: unknown field "
                                "'resyncc' (did you mean 'resync'?)")
    assert "Traceback" not in r.stderr
    assert not (repo.state / "daemon.lock").exists()


def test_plan_and_the_daemon_name_the_fleet_files_first_problem(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", monitor_yaml("tick", "echo hi"))
    repo.write("fleet.yaml", "devices:\n  - name: test-box\n    adress: 'h:1'\n")
    expected = ("error: fleet.yaml:3:5: devices.0.adress: unknown field 'adress' "
                "(did you mean 'address'?)")
    d = daemons()
    r = d.cli("plan")
    assert (r.returncode, r.stderr.strip()) == (1, expected)
    r = d.cli("run", "--once", timeout=30)
    assert (r.returncode, r.stderr.strip()) == (1, expected)
