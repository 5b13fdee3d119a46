#!/usr/bin/env python3
"""Benchmark: ``monitors plan`` beside ``monitors lint`` on 1,000 and 10,000 files.

Plan reads what lint reads (the same loader, the same checks) and then computes the
desired set and the diff against the running registry, so lint is its floor. Goal
(issue 17): plan <= 1.3x lint at 1k and 10k files, and both linear in files.

The repository is ``bench/lint_scale.py``'s (every source type, conditions,
templates, labels, placement) with one file in ``--invalid-every`` made invalid (an
action naming a channel monitors.toml does not define: an error plan must report
and keep out of the desired set), because an invalid file costs plan more than a
valid one. Each size also runs lint with ``--duplicates N`` identical files (each
names every other: the duplicate error lists at most a few names), printing its
output size: linear, not quadratic.

Both use the cache of per-file results in the state directory (``config.filecache``):
"warm" runs find it filled by the run before, "cold" runs start without it (it is
deleted before each run, so a cold run also writes it). Runs are interleaved (lint,
plan, lint, plan, ...) so that load on this shared machine hits both alike; figures
are medians of wall and CPU (user + sys of the child, ``wait4``) seconds, and the
ratio plan / lint of each. Bytecode is cached in a private ``PYTHONPYCACHEPREFIX``,
warmed by one untimed run of each command.

    .venv/bin/python bench/plan_scale.py [--sizes 1000 10000] [--repeat 5]
                                         [--invalid-every 50] [--duplicates 2000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lint_scale  # the same generated repository

BIN = Path(sys.executable).parent


def make_invalid(paths: list[Path], every: int) -> int:
    """Make one file in ``every`` invalid (an unknown channel); return how many."""
    import yaml

    count = 0
    for path in paths[::every]:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        doc["action"] = {"type": "notify", "channel": "nowhere"}
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        count += 1
    return count


def timed(argv: list[str], env: dict[str, str], *, cold: Path | None = None
          ) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit code) of one run of ``argv``; with ``cold`` (a
    state directory), its cache is deleted first."""
    if cold is not None:
        shutil.rmtree(cold / "cache", ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - start, usage.ru_utime + usage.ru_stime,
            os.waitstatus_to_exitcode(status))


def line(label: str, runs: list[tuple[float, float, int]]) -> str:
    walls = [r[0] for r in runs]
    return (f"{label}: median {statistics.median(walls):6.3f} s wall, "
            f"{statistics.median(r[1] for r in runs):6.3f} s CPU "
            f"(runs {', '.join(f'{w:.3f}' for w in walls)}; exit {sorted({r[2] for r in runs})})")


def duplicates(tmp: Path, count: int, env: dict[str, str]) -> None:
    """Lint ``count`` identical files: output bytes and time."""
    repo = tmp / f"repo-dup-{count}"
    (repo / "monitors.d").mkdir(parents=True)
    body = "source: {type: poll, command: [make, test], interval: 30s}\naction: {type: notify}\n"
    for i in range(count):
        (repo / "monitors.d" / f"same-{i:05d}.yml").write_text(body, encoding="utf-8")
    argv = [str(BIN / "monitors"), "--root", str(repo), "lint"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    print(f"{count:>6} identical files  monitors lint: {elapsed:6.3f} s wall, output "
          f"{len(proc.stdout) + len(proc.stderr):,} bytes "
          f"({(len(proc.stdout) + len(proc.stderr)) / count:,.0f} per file; exit "
          f"{proc.returncode})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command per size")
    parser.add_argument("--invalid-every", type=int, default=50,
                        help="one file in N is invalid (0: none)")
    parser.add_argument("--duplicates", type=int, nargs="*", default=[200, 2000],
                        help="also lint N identical files (duplicate errors)")
    args = parser.parse_args()
    monitors = str(BIN / "monitors")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="plan-bench-") as tmp_text:
        tmp = Path(tmp_text)
        env = lint_scale.child_env("cached", tmp)
        for size in args.sizes:
            repo = tmp / f"repo-{size}"
            paths = lint_scale.generate(repo, size)
            bad = make_invalid(paths, args.invalid_every) if args.invalid_every else 0
            state = tmp / f"state-{size}"
            lint = [monitors, "--root", str(repo), "--state-dir", str(state), "lint"]
            plan = [monitors, "--root", str(repo), "--state-dir", str(state), "plan"]
            print(f"{size:>6} files ({bad} invalid)", flush=True)
            for mode in ("cold", "warm"):
                cold = state if mode == "cold" else None
                timed(lint, env, cold=cold)
                timed(plan, env, cold=cold)
                lint_runs, plan_runs = [], []
                for _ in range(args.repeat):
                    lint_runs.append(timed(lint, env, cold=cold))
                    plan_runs.append(timed(plan, env, cold=cold))
                print(f"  {mode} " + line("lint", lint_runs))
                print(f"  {mode} " + line("plan", plan_runs))
                wall = statistics.median(r[0] for r in plan_runs) / statistics.median(
                    r[0] for r in lint_runs)
                cpu = statistics.median(r[1] for r in plan_runs) / statistics.median(
                    r[1] for r in lint_runs)
                print(f"  {mode} ratio plan / lint: {wall:.2f} wall, {cpu:.2f} CPU "
                      f"(goal <= 1.3)", flush=True)
        for count in args.duplicates:
            duplicates(tmp, count, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
