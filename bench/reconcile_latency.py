"""Reconcile latency and plan cost (issue 5). Prints figures; asserts nothing.

1. Save-to-first-poll: a real daemon (``monitors run``) on a temp repository; each
   of N edits atomically replaces ``monitors.d/bench.yml`` (temp file + rename, as
   editors do) with a new command, so the monitor is replaced; the new command
   ``touch``es a marker file, whose mtime is the first poll. Reports p50/p99/max of
   (marker mtime - save time). Goal: p50 < 150 ms, p99 < 500 ms.
2. ``monitors plan`` against ``monitors lint`` on the same N files (1,000 and
   10,000 monitors), each run as a fresh subprocess, median of R runs, in one
   process, as a ratio. Goal: plan <= 1.3x lint.

Usage: ``.venv/bin/python bench/reconcile_latency.py [--edits 100] [--sizes 1000,10000]
[--runs 3] [--git]``
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _argv(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "reconciler", "--root", str(root), "--state-dir",
            str(root / ".history"), "--device", "bench", *args]


def _save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(edits: int) -> None:
    with tempfile.TemporaryDirectory(prefix="monitors-bench-") as tmp:
        root = Path(tmp)
        (root / "monitors.d" / "overlays").mkdir(parents=True)
        (root / "system").mkdir()
        markers = root / "markers"
        markers.mkdir()
        target = root / "monitors.d" / "bench.yml"

        def doc(i: int) -> str:
            return ("name: bench\nsource:\n  type: poll\n"
                    f"  command: [touch, {markers}/polled-{i}]\n  interval: 1h\n"
                    "action:\n  type: notify\n")

        _save(target, doc(0))
        log = open(root / "daemon.out", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(_argv(root, "run"), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            out = root / "daemon.out"
            while not (markers / "polled-0").exists() or b"daemon ready" not in out.read_bytes():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("daemon did not start; see " + str(root / "daemon.out"))
                time.sleep(0.005)
            samples: list[float] = []
            for i in range(1, edits + 1):
                marker = markers / f"polled-{i}"
                saved = time.time()
                _save(target, doc(i))
                deadline = time.monotonic() + 10
                while not marker.exists():
                    if time.monotonic() > deadline:
                        raise SystemExit(f"edit {i}: no first poll within 10 s")
                    time.sleep(0.001)
                samples.append(marker.stat().st_mtime - saved)
                time.sleep(0.05)  # let the replaced evaluator settle between edits
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            log.close()
        ms = [s * 1000 for s in samples]
        print(f"save-to-first-poll over {len(ms)} edits: p50 {_pct(ms, 0.5):.1f} ms, "
              f"p99 {_pct(ms, 0.99):.1f} ms, max {max(ms):.1f} ms, mean "
              f"{statistics.fmean(ms):.1f} ms (goal p50 < 150 ms, p99 < 500 ms)")


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def plan_vs_lint(size: int, runs: int, git: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="monitors-bench-") as tmp:
        root = Path(tmp)
        user = root / "monitors.d"
        (user / "overlays").mkdir(parents=True)
        (root / "system").mkdir()
        for i in range(size):
            (user / f"m{i:05d}.yml").write_text(
                f"name: m{i:05d}\nsource:\n  type: poll\n  command: [echo, '{i}']\n"
                "  interval: 30s\naction:\n  type: notify\n", encoding="utf-8")
        if git:
            for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@b", "-c",
                                                         "user.name=b", "commit", "-qm", "x"]):
                subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
        lint, plan = [], []
        for _ in range(runs):
            lint.append(_timed(_argv(root, "lint")))
            plan.append(_timed(_argv(root, "plan")))
        lm, pm = statistics.median(lint), statistics.median(plan)
        where = "git checkout" if git else "plain directory"
        print(f"{size:>6} monitors ({where}): lint {lm:.2f} s, plan {pm:.2f} s (medians of "
              f"{runs}); plan/lint = {pm / lm:.2f}x (goal <= 1.3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--git", action="store_true", help="plan in a git checkout too")
    args = parser.parse_args()
    latency(args.edits)
    for size in (int(s) for s in args.sizes.split(",") if s):
        plan_vs_lint(size, args.runs, git=False)
        if args.git:
            plan_vs_lint(size, args.runs, git=True)


if __name__ == "__main__":
    main()
