"""After a SIGKILL: leftovers are swept at the next start, and the fire count shown
agrees with the fire records (issue 9 §7)."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable

from tests.conftest import Repo
from tests.daemon.conftest import Daemon, wait_for
from tests.factories import monitor_yaml


def test_after_a_sigkill_list_counts_the_fire_records_and_leftovers_are_swept(
        repo: Repo, daemons: Callable[..., Daemon]) -> None:
    repo.write("monitors.d/a.yml", monitor_yaml(
        "a", "[date, '+%N']", interval="500ms", extra="condition:\n  mode: every\n"))
    d = daemons().start()
    wait_for(lambda: len(d.fires("a")) >= 4, what="four fires", log=d.log)
    assert d.stop(signal.SIGKILL) == -signal.SIGKILL  # liveness is flushed every 5 s

    def counts() -> tuple[int, int]:
        row = json.loads(d.cli("list", "--json").stdout)["monitors"][0]
        records = len(json.loads(d.cli("runs", "a", "--json", "--limit", "100000").stdout))
        return row["fires"], records

    shown, records = counts()
    assert shown == records == len(d.fires("a")), "list disagrees with the fire records"
    fires = repo.state / "monitors" / "a" / "fires"
    torn = fires / "20200101T000000.000000-deadbeef"  # mkdir done, event.json never written
    torn.mkdir()
    temp = repo.state / "monitors" / "a" / ".state.json.abc123.tmp"
    temp.write_text("{")
    d2 = daemons(log_name="second.log").start()
    wait_for(lambda: "removed what a crash left" in d2.log_text(), what="sweep line",
             log=d2.log)
    assert not torn.exists() and not temp.exists()
    # (at least: the SIGKILL itself may have left one more)
    assert re.search(r"[1-9]\d* temp file\(s\), [1-9]\d* fire directory\(ies\) without "
                     r"event.json", d2.log_text())
    assert d2.stop() == 0
    shown, records = counts()
    assert shown == records == len(d.fires("a"))
    assert f"fired {records}x" in d.cli("list").stdout
