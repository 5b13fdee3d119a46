#!/usr/bin/env python3
"""Benchmark: ``monitors lint`` against ``check-jsonschema`` on 1,000 and 10,000 files.

Generates realistic monitor files (every source type, match/on-change/every
conditions, regexes, templates with ``{event}`` and ``{{ }}``, labels, placement,
rate limits) into a temp repository, then, in one run, times:

* cold: ``monitors lint --no-cache`` (the installed console script, a fresh process
  each time: imports included; every file checked) and its peak RSS (``wait4``
  rusage of that child); then ``monitors lint`` with its cache of per-file results
  (``config.filecache``) removed before each run (a first run: every file checked and
  the cache written), and warm: with the cache filled by the run before (what a
  repeated run costs). Each as median wall and CPU seconds;
* ``check-jsonschema --schemafile schemas/monitor.schema.json FILE...`` on the
  same files (schema only: it does less than lint);
* in-process engine figures: parse one file with PyYAML's C and pure loaders,
  validate one document with ``jsonschema`` and ``jsonschema_rs`` (the choice
  in ``config/schemas.py`` rests on these).

Prints medians and ratios. Goals (issue 2, checking every file): 1,000 files < 0.5 s
wall and at most 1/5 of check-jsonschema; 10,000 < 3 s; peak < 200 MB. Issue 17 goal
6: a lint of 10,000 files < 1.5 s, cold (every file checked) and warm (the cache):
printed as a ``goal`` line per size of 10,000 or more. Noisy shared machines: read
medians, CPU seconds (user + sys of the child, less sensitive to other load) and
ratios, not single runs.

Bytecode: by default (``--bytecode cached``) every child runs with its compiled
bytecode cached in a private ``PYTHONPYCACHEPREFIX`` under the temp directory,
warmed by one untimed run, as an installed package runs (pip compiles ``.pyc``
files at install). ``--bytecode env`` keeps the caller's environment: with
``PYTHONDONTWRITEBYTECODE=1`` and no cache, each run compiles every module of
this package from source (about 50 ms more per run).

Also prints the start-up cost (``monitors lint`` of an empty repository) and
which of jinja2, httpx, asyncio and jsonschema (the pure-Python engine) a lint
of the generated files imports.

    .venv/bin/python bench/lint_scale.py [--sizes 1000 10000] [--repeat 5] [--peer-repeat 3]
                                         [--bytecode cached|env] [--no-peer]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SCHEMA = ROOT / "schemas" / "monitor.schema.json"
GOAL = 1.5
"""Issue 17 goal 6: seconds for a lint of 10,000 files, cold and warm."""
CACHE = Path(".history") / "cache"
"""The per-file result cache below a generated repository (``filecache.path`` of the
default state directory)."""

TEMPLATES = [
    """# yaml-language-server: $schema=../schemas/monitor.schema.json
name: {name}
description: Wake an agent when CI on PR {n} goes red
source:
  type: poll
  command: gh pr checks {n} --json name,bucket
  interval: 30s
  timeout: 20s
condition:
  mode: match
  match: 'fail|error|cancelled'
  dedupeKey: 'build (\\d+)'
action:
  type: run
  agent: claude
  prompt: "CI failed on #{n}: {{event}}. Diagnose and fix."
labels: {{team: ci, pr: "{n}"}}
device: build-box-{d}
rateLimit: {{max: 5, per: 1m}}
""",
    """name: {name}
description: Health of service {n}
source:
  type: poll-http
  url: https://svc-{n}.example.com/healthz
  interval: 1m
  headers:
    Accept: application/json
condition:
  mode: match
  match: '^5\\d\\d'
action:
  type: notify
  channel: ops
  message: "{{{{ monitor.name }}}} is down: {{{{ event }}}}"
labels: {{team: sre}}
devices: [box-a, box-b]
""",
    """name: {name}
source:
  type: file
  path: /var/lib/app/{n}/status.json
  interval: 10s
condition:
  mode: on-change
  ignore: ['"updatedAt": "[^"]*"']
action:
  type: webhook-out
  url: https://hooks.example.com/status/{n}
  secretEnv: HOOK_SECRET
  maxAttempts: 5
""",
    """name: {name}
description: tail the log of job {n}
source:
  type: command
  command: [journalctl, -f, -u, job-{n}.service]
  backoff: 2s
condition:
  mode: match
  match: 'ERROR|Traceback'
action:
  type: routine
  routine: triage
  prompt: "job {n}: {{event}}"
rateLimit: {{max: 10, per: 1h}}
""",
    """name: {name}
source:
  type: pid
  pid: {pid}
action:
  type: run
  command: [notify-send, "build {n} finished", "{{prompt}}"]
  prompt: "{{% if observation %}}exited: {{{{ observation }}}}{{% endif %}}"
  timeout: 10m
""",
    """name: {name}
description: disk headroom on volume {n}
enabled: true
source:
  type: poll
  command: df -P /mnt/vol{n}
  interval: 5m
condition: {{mode: match, match: '(9[0-9]|100)%'}}
action: {{type: notify, message: "disk {n}: {{event}}"}}
sharedInput: false
""",
]


SETTINGS = """[routines.triage]
argv = ["echo", "{prompt}"]

[channels.ops]
url = "json://127.0.0.1:9/hook"
"""


def generate(directory: Path, count: int) -> list[Path]:
    (directory / "monitors.d").mkdir(parents=True)
    (directory / "system").mkdir()
    (directory / "monitors.toml").write_text(SETTINGS, encoding="utf-8")
    paths = []
    for i in range(count):
        name = f"mon-{i:05d}"
        text = TEMPLATES[i % len(TEMPLATES)].format(name=name, n=1000 + i, d=i % 7, pid=2 + i)
        path = directory / "monitors.d" / f"{name}.yml"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def timed(argv: list[str], *, cwd: Path,
          env: dict[str, str] | None = None) -> tuple[float, int, int, float]:
    """Run ``argv``; return (wall seconds, exit code, peak RSS bytes, CPU seconds) of
    that child (``wait4`` rusage: user + system time)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, proc.returncode, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def child_env(mode: str, tmp: Path) -> dict[str, str]:
    """The children's environment for ``--bytecode`` ``mode`` (see the module doc)."""
    env = dict(os.environ)
    if mode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def imported(argv: list[str], *, cwd: Path, env: dict[str, str]) -> list[str]:
    """Which of the modules lint should not need a run of ``argv`` imports
    (``python -X importtime``)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
             if line.startswith("import time:")}
    return [name for name in ("jinja2", "httpx", "asyncio", "jsonschema") if name in names]


def medians(runs: list[tuple[float, int, int, float]]) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) of ``timed`` runs."""
    return statistics.median(r[0] for r in runs), statistics.median(r[3] for r in runs)


def goal(size: int, label: str, runs: list[tuple[float, int, int, float]]) -> str:
    """The issue 17 goal 6 line for ``runs`` of a lint of ``size`` files."""
    wall, cpu = medians(runs)

    def met(seconds: float) -> str:
        return "met" if seconds < GOAL else "NOT met"

    return (f"{size:>6} files  goal ({label} < {GOAL} s): CPU {cpu:.3f} s {met(cpu)}, "
            f"wall {wall:.3f} s {met(wall)} (wall: only on a quiet machine)")


def summary(runs: list[tuple[float, int, int, float]]) -> str:
    walls = [t for t, _, _, _ in runs]
    cpu = statistics.median(c for *_, c in runs)
    return (f"median {statistics.median(walls):6.3f} s, CPU {cpu:6.3f} s "
            f"(runs {', '.join(f'{t:.3f}' for t in walls)}; exit {sorted({r[1] for r in runs})}), "
            f"peak RSS {max(r[2] for r in runs) / 1e6:6.1f} MB")


def engines(paths: list[Path]) -> None:
    import jsonschema
    import jsonschema_rs
    import yaml

    sample = paths[: min(len(paths), 600)]
    texts = [p.read_text() for p in sample]
    schema = json.loads(SCHEMA.read_text())

    def per_item(fn: object, items: list[object]) -> float:
        start = time.perf_counter()
        for item in items:
            fn(item)  # type: ignore[operator]
        return (time.perf_counter() - start) / len(items) * 1e6

    docs = [yaml.load(t, Loader=yaml.CSafeLoader) for t in texts]
    c_load = per_item(lambda t: yaml.load(t, Loader=yaml.CSafeLoader), texts)  # type: ignore[arg-type]
    c_compose = per_item(lambda t: yaml.compose(t, Loader=yaml.CSafeLoader), texts)  # type: ignore[arg-type]
    py_load = per_item(lambda t: yaml.load(t, Loader=yaml.SafeLoader), texts[:100])  # type: ignore[arg-type]
    py_validator = jsonschema.Draft202012Validator(schema)
    rs_validator = jsonschema_rs.validator_for(schema)
    py_time = per_item(lambda d: list(py_validator.iter_errors(d)), docs)  # type: ignore[arg-type]
    rs_time = per_item(lambda d: list(rs_validator.iter_errors(d)), docs)  # type: ignore[arg-type]
    print("per file (µs, in process):")
    print(f"  yaml C loader load {c_load:8.1f}   compose {c_compose:8.1f}   "
          f"pure-Python load {py_load:8.1f}")
    print(f"  jsonschema {py_time:8.1f}   jsonschema_rs {rs_time:8.1f}   "
          f"ratio {py_time / rs_time:6.0f}x  -> engine: "
          f"{'jsonschema_rs' if rs_time < py_time else 'jsonschema'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=5, help="monitors lint runs per size")
    parser.add_argument("--peer-repeat", type=int, default=3,
                        help="check-jsonschema runs per size (1 at 10,000 and above)")
    parser.add_argument("--no-peer", action="store_true", help="skip check-jsonschema")
    parser.add_argument("--bytecode", choices=["cached", "env"], default="cached",
                        help="cached: private warmed .pyc cache (as installed); env: as called")
    args = parser.parse_args()

    monitors = BIN / "monitors"
    peer = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}, "
          f"bytecode {args.bytecode}")
    with tempfile.TemporaryDirectory(prefix="lint-bench-") as tmp:
        env = child_env(args.bytecode, Path(tmp))
        empty = Path(tmp) / "repo-empty"
        generate(empty, 0)
        lint_empty = [str(monitors), "--root", str(empty), "lint"]
        timed(lint_empty, cwd=empty, env=env)  # warm the bytecode cache
        runs = [timed(lint_empty, cwd=empty, env=env) for _ in range(args.repeat)]
        print(f"{0:>6} files  monitors lint (start-up): {summary(runs)}", flush=True)
        for size in args.sizes:
            repo = Path(tmp) / f"repo-{size}"
            paths = generate(repo, size)
            if size == args.sizes[0]:
                engines(paths)
            lint = [str(monitors), "--root", str(repo), "lint", "--no-cache"]
            if size == args.sizes[0]:
                print(f"  a lint of these files imports: {imported(lint, cwd=repo, env=env)} "
                      f"(of jinja2, httpx, asyncio, jsonschema)")
                timed(lint, cwd=repo, env=env)  # warm the bytecode cache
            runs = [timed(lint, cwd=repo, env=env) for _ in range(args.repeat)]
            lint_median = statistics.median(t for t, _, _, _ in runs)
            print(f"{size:>6} files  monitors lint --no-cache (cold): {summary(runs)}",
                  flush=True)
            cached = lint[:-1]
            first = []
            for _ in range(args.repeat):
                shutil.rmtree(repo / CACHE, ignore_errors=True)
                first.append(timed(cached, cwd=repo, env=env))
            print(f"{size:>6} files  monitors lint (empty cache: cold, writes it): "
                  f"{summary(first)}", flush=True)
            warm = [timed(cached, cwd=repo, env=env) for _ in range(args.repeat)]
            print(f"{size:>6} files  monitors lint (warm cache): {summary(warm)}", flush=True)
            if size >= 10000:
                print(goal(size, "cold", runs))
                print(goal(size, "warm", warm), flush=True)
            if args.no_peer or peer is None:
                continue
            rel = [str(p.relative_to(repo)) for p in paths]
            repeat = 1 if size >= 10000 else args.peer_repeat
            peer_argv = [peer, "--schemafile", str(SCHEMA), *rel]
            if size == args.sizes[0]:
                timed(peer_argv, cwd=repo, env=env)  # the same warm bytecode cache
            peer_runs = [timed(peer_argv, cwd=repo, env=env) for _ in range(repeat)]
            peer_median = statistics.median(t for t, _, _, _ in peer_runs)
            print(f"{size:>6} files  check-jsonschema: {summary(peer_runs)}")
            print(f"{size:>6} files  ratio monitors lint / check-jsonschema: "
                  f"{lint_median / peer_median:.3f} ({peer_median / lint_median:.1f}x faster)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
