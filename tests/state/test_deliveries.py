"""The webhook spool and replay window on disk (``state.deliveries``), on a fake clock."""

from __future__ import annotations

from pathlib import Path

from reconciler.state import deliveries
from reconciler.state.deliveries import DeliveryLog, Spooled


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def spooled(delivery: str | None, at: float, body: bytes = b"{}") -> Spooled:
    return Spooled(provider="github", event="push", action=None, delivery=delivery,
                   monitors=("m",), received_at=at, body=body)


def test_spool_round_trips_the_raw_body_and_done_removes_it(tmp_path: Path) -> None:
    log = DeliveryLog(tmp_path)
    body = b'{"a": 1}\n\xff raw bytes\n'
    written = log.spool(spooled("d-1", 1.0, body))
    assert written.path is not None and written.path.is_file()
    assert oct(written.path.stat().st_mode & 0o777) == "0o600"
    again = DeliveryLog(tmp_path).pending()
    assert [(s.delivery, s.body, s.monitors) for s in again] == [("d-1", body, ("m",))]
    log.done(again[0])
    assert DeliveryLog(tmp_path).pending() == []


def write_window(tmp_path: Path, ids: range, at: float) -> Path:
    """A ``seen.log`` of ``github:d-<i>`` received at ``at`` (what a long run leaves)."""
    path = tmp_path / deliveries.HOOKS_DIR / deliveries.SEEN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{at:.3f} github:d-{i}\n" for i in ids))
    return path


def test_window_keeps_a_day_and_ten_thousand_ids_across_restarts(tmp_path: Path) -> None:
    clock = Clock()
    path = write_window(tmp_path, range(deliveries.KEEP + 50), clock.now)
    clock.now += deliveries.WINDOW + 1  # all of them are now older than a day
    DeliveryLog(tmp_path, clock=clock).spool(spooled("new", clock.now))
    reopened = DeliveryLog(tmp_path, clock=clock)
    assert reopened.seen("github", "new")
    assert reopened.seen("github", f"d-{deliveries.KEEP + 49}")  # the last 10,000 stay
    assert reopened.seen("github", "d-51")
    assert not reopened.seen("github", "d-50")  # older than a day and beyond 10,000
    assert not reopened.seen("github", "d-0")
    assert not reopened.seen("linear", "new")  # ids are per provider
    assert len(path.read_text().splitlines()) == deliveries.KEEP + 51  # appended


def test_recent_ids_are_kept_beyond_ten_thousand(tmp_path: Path) -> None:
    clock = Clock()
    write_window(tmp_path, range(deliveries.KEEP + 10), clock.now - 3600)
    log = DeliveryLog(tmp_path, clock=clock)
    log.spool(spooled("new", clock.now))
    assert DeliveryLog(tmp_path, clock=clock).seen("github", "d-0")  # within the day


def test_the_log_is_compacted_when_it_holds_twice_the_window(tmp_path: Path) -> None:
    clock = Clock()
    path = write_window(tmp_path, range(3 * deliveries.KEEP), clock.now - 2 * deliveries.WINDOW)
    DeliveryLog(tmp_path, clock=clock).spool(spooled("new", clock.now))
    assert len(path.read_text().splitlines()) == deliveries.KEEP
    assert DeliveryLog(tmp_path, clock=clock).seen("github", "new")


def test_a_pending_delivery_counts_as_seen(tmp_path: Path) -> None:
    """A crash between the spool write and the window append cannot let a redelivery in."""
    log = DeliveryLog(tmp_path)
    log.spool(spooled("d-9", 1.0))
    (tmp_path / deliveries.HOOKS_DIR / deliveries.SEEN_FILE).unlink()
    assert DeliveryLog(tmp_path).seen("github", "d-9")
