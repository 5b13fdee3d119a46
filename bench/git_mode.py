"""Git mode (issue 12): commit -> running, and the cost of a reconcile that finds the
followed ref unchanged. Prints figures; asserts nothing.

1. Commit to running: a real daemon (``monitors run``) follows ``[git] ref = "main"``
   of a temp repository holding M other monitors; each of N commits changes
   ``monitors.d/bench.yml``'s command, which ``touch``es a marker file: its mtime is the
   first poll of the new version. Reports p50/p90/max of (marker mtime - the time
   ``git commit`` returned). Goal: p50 < 1 s.
2. Unchanged ref: ``Reconciler.reconcile`` in this process (the real parts) on the same
   kind of repository after a first reconcile, R times: median and p90 of one
   reconcile, and how many times the loader and the fleet file were read meanwhile
   (goal: 0, i.e. no YAML parsed; the time well under 10 ms). Printed beside the
   same reconcile in local mode (working tree), which re-reads every file.

Usage: ``.venv/bin/python bench/git_mode.py [--commits 20] [--monitors 200] [--runs 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid",
       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env=ENV, check=True, capture_output=True)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _monitor(name: str, command: str) -> str:
    return (f"name: {name}\nsource:\n  type: poll\n  command: {command}\n  interval: 1h\n"
            "action:\n  type: notify\n")


def _repo(root: Path, monitors: int, *, git_mode: bool) -> None:
    (root / "monitors.d").mkdir(parents=True)
    for i in range(monitors):
        (root / "monitors.d" / f"m{i:04d}.yml").write_text(_monitor(f"m{i:04d}", f"[echo, m{i}]"))
    (root / ".gitignore").write_text(".history/\nmonitors.toml\nmarkers/\n")
    if git_mode:
        (root / "monitors.toml").write_text('[git]\nref = "main"\n')
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")


def commit_to_running(commits: int, monitors: int) -> None:
    with tempfile.TemporaryDirectory(prefix="monitors-bench-") as tmp:
        root = Path(tmp) / "repo"
        _repo(root, monitors, git_mode=True)
        markers = root / "markers"
        markers.mkdir()
        bench = root / "monitors.d" / "bench.yml"
        log = open(root.parent / "daemon.out", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "--root", str(root), "--state-dir",
             str(root / ".history"), "--device", "bench", "run"],
            stdout=log, stderr=subprocess.STDOUT, cwd=root, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while b"daemon ready" not in (root.parent / "daemon.out").read_bytes():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the daemon did not start:\n" +
                                     (root.parent / "daemon.out").read_text())
                time.sleep(0.05)
            lags = []
            for i in range(commits):
                marker = markers / f"polled-{i}"
                bench.write_text(_monitor("bench", f"[touch, {marker}]"))
                _git(root, "add", "monitors.d/bench.yml")
                _git(root, "commit", "-q", "-m", f"bench {i}")
                committed = time.time()
                deadline = time.monotonic() + 30
                while not marker.exists():
                    if time.monotonic() > deadline:
                        raise SystemExit(f"commit {i} never ran:\n" +
                                         (root.parent / "daemon.out").read_text()[-3000:])
                    time.sleep(0.005)
                lags.append(marker.stat().st_mtime - committed)
            print(f"commit -> running (local ref, {monitors} other monitors, {commits} "
                  f"commits): p50 {statistics.median(lags) * 1000:.0f} ms, "
                  f"p90 {_pct(lags, 0.9) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
                  "(goal p50 < 1000 ms)")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
            log.close()


async def _unchanged(root: Path, runs: int) -> tuple[list[float], int, int]:
    from reconciler import fleet, redaction, settings
    from reconciler.config import loader
    from reconciler.daemon import parts as parts_mod
    from reconciler.daemon import reconcile as reconcile_mod
    from reconciler.state import registry as registry_mod

    cfg = settings.load(root=root, state_dir=root / ".history", device="bench")
    registry = registry_mod.Registry(device="bench", pid=os.getpid())
    rec = reconcile_mod.Reconciler(cfg, registry, redactor=redaction.Redactor(), boot_good={})
    rec.follow()
    rec.parts = parts_mod.build(cfg, registry, redactor=rec.redactor,
                                on_autopause=lambda name: None)
    await rec.reconcile(trigger="start")
    await asyncio.sleep(3)  # the first polls of every monitor: not what is measured
    calls = {"loader": 0, "fleet": 0}
    real_load, real_fleet = loader.load, fleet.load

    def counting_load(*a: object, **k: object) -> object:
        calls["loader"] += 1
        return real_load(*a, **k)  # type: ignore[arg-type]

    def counting_fleet(*a: object, **k: object) -> object:
        calls["fleet"] += 1
        return real_fleet(*a, **k)  # type: ignore[arg-type]

    loader.load, fleet.load = counting_load, counting_fleet  # type: ignore[assignment]
    times = []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            await rec.reconcile(trigger="resync")
            times.append(time.perf_counter() - start)
    finally:
        loader.load, fleet.load = real_load, real_fleet  # type: ignore[assignment]
        await rec.parts.engine.close()
    return times, calls["loader"], calls["fleet"]


def unchanged_ref(monitors: int, runs: int) -> None:
    import logging

    logging.disable(logging.WARNING)  # the daemon's own log lines are not figures
    for git_mode in (True, False):
        with tempfile.TemporaryDirectory(prefix="monitors-bench-") as tmp:
            root = Path(tmp) / "repo"
            _repo(root, monitors, git_mode=git_mode)
            times, loads, fleets = asyncio.run(_unchanged(root, runs))
            mode = "git mode, ref unchanged" if git_mode else "local mode, tree unchanged"
            print(f"reconcile, {mode} ({monitors} monitors, {runs} runs): "
                  f"median {statistics.median(times) * 1000:.2f} ms, "
                  f"p90 {_pct(times, 0.9) * 1000:.2f} ms; layers loaded {loads}x, "
                  f"fleet read {fleets}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--monitors", type=int, default=200)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    commit_to_running(args.commits, args.monitors)
    unchanged_ref(args.monitors, args.runs)


if __name__ == "__main__":
    main()
