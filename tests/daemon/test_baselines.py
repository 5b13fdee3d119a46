"""Baselines follow what is observed, with the real daemon: editing the interval or the
match of a monitor whose failure is still present does not repeat its alert; editing
the command does; the log says which and why."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for

FILE = """
name: ci
source: {{type: poll, command: {command}, interval: {interval}}}
condition: {{mode: match, match: '{match}'}}
action: {{type: notify}}
"""


def test_edits_keep_or_renew_the_baseline(repo: Repo, daemons: Callable[..., Daemon]) -> None:
    def write(command: str = "[echo, 'fail build 7']", interval: str = "500ms",
              match: str = "fail") -> None:
        repo.write("monitors.d/ci.yml", FILE.format(command=command, interval=interval,
                                                   match=match))

    write()
    d = daemons().start()
    wait_for(lambda: len(d.fires("ci")) == 1, what="the first alert", log=d.log)

    def replaced(times: int) -> bool:
        return d.log_text().count("replace ci: ") >= times

    def checks_after() -> Callable[[], bool]:
        start = d.liveness("ci").get("checkCount", 0)
        return lambda: d.liveness("ci").get("checkCount", 0) >= start + 3

    write(interval="600ms")
    wait_for(lambda: replaced(1), what="the interval edit", log=d.log)
    assert "replace ci: fingerprint changed: baseline kept (source.interval" in d.log_text()
    wait_for(checks_after(), what="three checks", log=d.log)
    assert len(d.fires("ci")) == 1

    write(interval="600ms", match="fail|error")
    wait_for(lambda: replaced(2), what="the match edit", log=d.log)
    assert ("fingerprint changed: new baseline (condition.match changed; the signatures "
            "fired in the current episode are kept)") in d.log_text()
    wait_for(checks_after(), what="three checks", log=d.log)
    assert len(d.fires("ci")) == 1

    write(command="[echo, 'fail build 7 again']", interval="600ms", match="fail|error")
    wait_for(lambda: replaced(3), what="the command edit", log=d.log)
    assert "new baseline (source.command changed: what is observed)" in d.log_text()
    wait_for(lambda: len(d.fires("ci")) == 2, what="the alert under the new baseline",
             log=d.log)
    assert d.stop() == 0
