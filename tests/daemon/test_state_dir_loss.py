"""The daemon stops when its state directory is deleted or its lock replaced under it."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for


def test_deleted_state_directory_stops_the_daemon(repo: Repo,
                                                  daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 1s}\ncondition: {mode: every}\n"
                                      "action: {type: notify}\n")
    first = daemons().start()
    wait_for(lambda: first.fires("tick"), what="a first fire", log=first.log)

    def removed() -> bool:  # `rm -rf .history`, retried while the daemon writes into it
        shutil.rmtree(repo.state, ignore_errors=True)
        return not repo.state.exists()

    wait_for(removed, what=".history removed", log=first.log)
    # the running daemon notices within a few seconds and exits non-zero
    assert first.proc is not None
    wait_for(lambda: first.proc is not None and first.proc.poll() is not None, timeout=15,
             what="the first daemon exiting", log=first.log)
    assert first.proc.returncode == 1
    lines = [x for x in first.log_text().splitlines() if "ERROR" in x and "lost" in x]
    assert len(lines) == 1 and "daemon.lock" in lines[0], first.log_text()[-2000:]
    # it wrote nothing into the directory after it was lost
    assert not (repo.state / "running.json").exists()
    # a second daemon now owns the directory alone and fires
    second = daemons(log_name="second.log").start()
    wait_for(lambda: second.fires("tick"), what="the second daemon firing", log=second.log)
    assert second.stop() == 0


def test_lock_replaced_under_the_daemon_stops_it(repo: Repo,
                                                 daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/tick.yml", "source: {type: poll, command: [echo, hi], "
                                      "interval: 5s}\naction: {type: notify}\n")
    d = daemons("--resync", "60s").start()
    lock = repo.state / "daemon.lock"
    lock.unlink()
    lock.write_text("12345\n")  # a new inode: another daemon could lock it
    assert d.proc is not None
    wait_for(lambda: d.proc is not None and d.proc.poll() is not None, timeout=15,
             what="the daemon exiting", log=d.log)
    assert d.proc.returncode == 1 and "lock file replaced" in d.log_text()
