#!/usr/bin/env python3
"""Benchmark: start-up of the ``monitors`` command beside the interpreter's own.

Interleaved runs (so that load on a shared machine hits every command alike) of:

* ``python -c pass``: the floor, what any Python command pays;
* ``monitors --version`` (issue 17 goal: < 60 ms; answered before click loads);
* ``monitors lint`` of an empty repository (the start-up of a real command: click,
  the config stage; issue 10: no slower than before the type modules were split);
* ``monitors lint`` of a few monitors with and without a ``fleet.yaml`` (issue 17:
  the fleet file is validated by the compiled validator lint already loaded, so the
  ratio stays near 1).

Prints the median wall and CPU (user + sys of the child, ``wait4``) milliseconds of
each and the ratios. Bytecode is cached in a private ``PYTHONPYCACHEPREFIX``, warmed
by one untimed run of each command.

    .venv/bin/python bench/startup.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent

MONITOR = """source: {type: poll, command: [make, test], interval: 30s}
condition: {mode: match, match: 'fail|error'}
action: {type: notify, message: "{{ monitor.name }}: {{ event }}"}
devices: [box-a, box-b]
"""

FLEET = """devices:
  - {name: box-a, address: '10.0.0.1:7070'}
  - {name: box-b, address: '10.0.0.2:7070'}
"""


def repository(root: Path, *, monitors: int, fleet: bool) -> Path:
    (root / "monitors.d").mkdir(parents=True)
    for i in range(monitors):
        (root / "monitors.d" / f"m-{i}.yml").write_text(
            MONITOR.replace("make, test", f"make, test-{i}"), encoding="utf-8")
    if fleet:
        (root / "fleet.yaml").write_text(FLEET, encoding="utf-8")
    return root


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    _, _, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - start) * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    monitors = str(BIN / "monitors")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp_text:
        tmp = Path(tmp_text)
        env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        empty = repository(tmp / "empty", monitors=0, fleet=False)
        plain = repository(tmp / "plain", monitors=3, fleet=False)
        fleet = repository(tmp / "fleet", monitors=3, fleet=True)
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "monitors --version": [monitors, "--version"],
            "monitors lint (empty repository)": [monitors, "--root", str(empty), "lint"],
            "monitors lint (3 monitors)": [monitors, "--root", str(plain), "lint",
                                           "--no-cache"],
            "monitors lint (3 monitors, fleet.yaml)": [monitors, "--root", str(fleet), "lint",
                                                       "--no-cache"],
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for argv in commands.values():
            timed(argv, env)
        for _ in range(args.repeat):
            for name, argv in commands.items():
                runs[name].append(timed(argv, env))
    wall = {name: statistics.median(w for w, _ in r) for name, r in runs.items()}
    cpu = {name: statistics.median(c for _, c in r) for name, r in runs.items()}
    floor = "python -c pass (floor)"
    for name in commands:
        print(f"  {name:40s} median {wall[name]:6.1f} ms wall, {cpu[name]:6.1f} ms CPU"
              f"  ({wall[name] / wall[floor]:.2f}x the floor)")
    print(f"  --version goal < 60 ms: {wall['monitors --version']:.1f} ms")
    with_fleet = wall["monitors lint (3 monitors, fleet.yaml)"] / wall["monitors lint (3 monitors)"]
    print(f"  lint with fleet.yaml / without: {with_fleet:.2f} wall, "
          f"{cpu['monitors lint (3 monitors, fleet.yaml)'] / cpu['monitors lint (3 monitors)']:.2f}"
          f" CPU (goal: no slower)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
