"""``monitors run --once`` against urlwatch on the same command jobs (issue 17, goal 2).

Both tools get N jobs that each run ``echo <i>`` through the shell and compare the
output with the previous run's: N ``poll`` monitors (``monitors.d/j<i>.yml``, notify
action) and N urlwatch ``command`` jobs (``urls.yaml``). Each tool first runs once to
record its baselines; then R timed runs alternate between the two (fresh processes,
wall time), and the medians and their ratio are printed. Goal: monitors <= urlwatch.

urlwatch is installed with pip into its own virtual environment (default
``~/.cache/monitors-bench/urlwatch``, kept between runs), never into the project's.
Its HOME, config, cache and hooks live in the temp directory of the run.

Also printed: the heavy modules the one-shot run imported (``python -X importtime``):
a run of command monitors needs none of httpx, jinja2, apprise, prometheus_client.

Usage::

    .venv/bin/python bench/once_vs_urlwatch.py [--jobs 100] [--runs 7] [--venv DIR]
    PYTHONPATH=/path/to/older/checkout .venv/bin/python bench/once_vs_urlwatch.py  # before
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

URLWATCH = "urlwatch==2.29"
"""The peer, pinned so figures compare across runs."""

HEAVY = ("httpx", "httpcore", "anyio", "jinja2", "apprise", "prometheus_client")


def ensure_urlwatch(venv: Path) -> Path:
    """The urlwatch executable in ``venv``, installed there (pip) when missing."""
    exe = venv / "bin" / "urlwatch"
    if not exe.exists():
        print(f"installing {URLWATCH} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", URLWATCH],
                       check=True)
    return exe


def monitors_argv(root: Path) -> list[str]:
    exe = Path(sys.executable).with_name("monitors")
    head = [str(exe)] if exe.exists() else [sys.executable, "-m", "reconciler"]
    return [*head, "--root", str(root), "--state-dir", str(root / ".history"),
            "--device", "bench", "run", "--once"]


def setup(base: Path, jobs: int) -> tuple[Path, Path]:
    """The monitors repository and the urlwatch directory for ``jobs`` jobs."""
    repo = base / "repo"
    (repo / "monitors.d").mkdir(parents=True)
    for i in range(jobs):
        (repo / "monitors.d" / f"j{i}.yml").write_text(
            f"name: j{i}\nsource:\n  type: poll\n  command: echo {i}\n  interval: 1h\n"
            "action:\n  type: notify\n")
    uw = base / "urlwatch"
    uw.mkdir()
    (uw / "urls.yaml").write_text("---\n".join(
        f"name: j{i}\ncommand: echo {i}\n" for i in range(jobs)))
    (uw / "hooks.py").write_text("")
    return repo, uw


def urlwatch_argv(exe: Path, uw: Path) -> list[str]:
    return [str(exe), "--urls", str(uw / "urls.yaml"), "--config", str(uw / "urlwatch.yaml"),
            "--hooks", str(uw / "hooks.py"), "--cache", str(uw / "cache.db")]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed, children_cpu() - cpu


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The top-level packages of ``HEAVY`` that a run of ``argv`` (Python) imported."""
    head = [sys.executable, "-X", "importtime", "-m", "reconciler"]
    root = argv[argv.index("--root") + 1]  # not this checkout: -m puts the cwd first
    done = subprocess.run(head + argv[argv.index("--root"):], env=env, capture_output=True,
                          text=True, cwd=root)
    seen = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name.split(".")[0] in HEAVY:
                seen.add(name.split(".")[0])
    return sorted(seen)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--venv", type=Path,
                   default=Path.home() / ".cache" / "monitors-bench" / "urlwatch")
    args = p.parse_args()
    exe = ensure_urlwatch(args.venv)
    with tempfile.TemporaryDirectory(prefix="bench-once-") as tmp:
        base = Path(tmp)
        repo, uw = setup(base, args.jobs)
        env = {**os.environ, "HOME": str(base)}
        ours_argv, peer_argv = monitors_argv(repo), urlwatch_argv(exe, uw)
        timed(ours_argv, env)  # baselines
        timed(peer_argv, env)
        ours: list[tuple[float, float]] = []
        peer: list[tuple[float, float]] = []
        for i in range(args.runs):
            pair = [(ours_argv, ours), (peer_argv, peer)]
            for argv, into in (pair if i % 2 == 0 else pair[::-1]):
                into.append(timed(argv, env))
        heavy = heavy_imports(ours_argv, env)
    print(f"once_vs_urlwatch: {args.jobs} command jobs, {args.runs} runs each, interleaved, "
          f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    for what, index in (("wall", 0), ("CPU (process and children)", 1)):
        m_ours = statistics.median(r[index] for r in ours)
        m_peer = statistics.median(r[index] for r in peer)
        print(f"  {what}: monitors run --once median {m_ours:.3f}s, {URLWATCH} median "
              f"{m_peer:.3f}s, ratio {m_ours / m_peer:.2f} (goal <= 1.00)")
        print(f"    runs: monitors {', '.join(f'{r[index]:.3f}' for r in ours)}; urlwatch "
              f"{', '.join(f'{r[index]:.3f}' for r in peer)}")
    print(f"  heavy modules the one-shot run imported: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
