"""HTTP load benchmark: a real daemon with N running monitors, C concurrent clients on
``/metrics`` and ``/v1/monitors``; request latency, and poll lateness with and without load.

One daemon subprocess (``monitors run``) on a temp repository of N ``file`` monitors
(interval I, each reading its own small file: cheap polls, so lateness shows the event
loop's delays rather than the sources') serves HTTP on a free loopback port. Then:

1. **no load**: D seconds idle;
2. **load**: C clients loop for D seconds on ``GET /metrics`` and ``GET /v1/monitors``
   (half each), keep-alive, with no pause between requests: ApacheBench (``ab``,
   Debian's apache2-utils) when installed, else httpx clients split over ``--procs``
   processes. On a 2-core machine the generator competes with the daemon for CPU;
   httpx clients cost far more than ab, so their figures mostly measure themselves
   (``--paths /healthz`` gives that floor).

Poll lateness comes from the daemon's own ``monitors_poll_lateness_seconds``
histogram (the difference of two scrapes around each phase; quantiles interpolated
within buckets, so they are bucket-resolution figures). The goal of issue 13:
lateness p99 under load < 2x the no-load p99.

Usage::

    .venv/bin/python bench/http_load.py                 # N=1000, C=200, D=10s
    .venv/bin/python bench/http_load.py --monitors 200 --clients 50 --duration 5

These machines are shared (2 cores): the phases alternate (``--rounds``) so that both
see the same background; compare ratios, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-token-0123456789abcdefghij"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_repo(base: Path, n: int, interval: str) -> Path:
    root = base / "repo"
    (root / "monitors.d" / "overlays").mkdir(parents=True)
    (root / "system").mkdir()
    (base / "watched").mkdir()
    for i in range(n):  # one file each: monitors with one fingerprint would be duplicates
        watched = base / "watched" / f"{i:04d}.txt"
        watched.write_text("steady\n")
        (root / "monitors.d" / f"m{i:04d}.yml").write_text(
            f"name: m{i:04d}\nsource:\n  type: file\n  path: {watched}\n"
            f"  interval: {interval}\naction:\n  type: notify\n  channel: log\n")
    return root


def scrape(url: str) -> dict[str, Any]:
    """Histogram buckets of poll lateness and the poll count from ``/metrics``."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"},
                     timeout=30).text
    buckets: dict[float, float] = {}
    polls = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "monitors_poll_lateness_seconds_bucket":
                buckets[float(s.labels["le"])] = s.value
            elif s.name == "monitors_polls_total":
                polls += s.value
    return {"buckets": buckets, "polls": polls}


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The ``q`` quantile of the observations between two scrapes (linear in a bucket)."""
    edges = sorted(after)
    counts = [after[e] - before.get(e, 0.0) for e in edges]
    total = counts[-1]
    if total <= 0:
        return float("nan")
    rank = q * total
    low, prev = 0.0, 0.0
    for edge, cum in zip(edges, counts, strict=True):
        if cum >= rank:
            if edge == float("inf"):
                return low
            inside = cum - prev
            return low + (edge - low) * ((rank - prev) / inside if inside else 0.0)
        low, prev = edge, cum
    return low


def durations_seconds(text: str) -> float:
    """``5s``, ``500ms``, ``2m`` in seconds (the bench's ``--interval``)."""
    for unit, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * factor
    raise SystemExit(f"--interval {text}: expected a duration such as 5s or 500ms")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (and its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PROBE = r"""
import asyncio, json, sys, time
RATE = float(sys.argv[1])
late = []
def tick(due):
    loop = asyncio.get_running_loop()
    late.append(loop.time() - due)
    loop.call_at(due + 1 / RATE, tick, due + 1 / RATE)
async def main():
    loop = asyncio.get_running_loop()
    loop.call_at(loop.time() + 0.1, tick, loop.time() + 0.1)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        got = sorted(late)
        late.clear()
        q = lambda p: got[min(len(got) - 1, int(p * len(got)))] if got else float("nan")
        print(json.dumps({"n": len(got), "p50": q(0.5), "p99": q(0.99)}), flush=True)
asyncio.run(main())
"""


class Probe:
    """The floor: a bare asyncio process whose timers fire at the daemon's poll rate and
    do nothing, measuring their own lateness. What it suffers under load is the machine
    (CPU taken by the load generator and others), not the daemon's design."""

    def __init__(self, rate: float) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, str(rate)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def mark(self) -> dict[str, float]:
        """Lateness since the last mark: ``{"n", "p50", "p99"}`` (seconds)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("mark\n")
        self.proc.stdin.flush()
        figures: dict[str, float] = json.loads(self.proc.stdout.readline())
        return figures

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def load(url: str, clients: int, duration: float, out: Any,
         paths: tuple[str, ...] = ("/metrics", "/v1/monitors")) -> None:
    """The load generator (its own process): ``clients`` tasks for ``duration`` s, each
    going round ``paths`` (starting at a different one)."""
    import httpx

    async def main() -> dict[str, Any]:
        latencies: dict[str, list[float]] = {p: [] for p in paths}
        failures: dict[str, int] = {}
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(limits=limits, timeout=30,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            deadline = time.monotonic() + duration

            async def client(i: int) -> None:
                n = i
                while time.monotonic() < deadline:
                    path = paths[n % len(paths)]
                    n += 1
                    t0 = time.monotonic()
                    try:
                        r = await c.get(url + path)
                        ok = r.status_code == 200
                        await r.aread()
                    except httpx.HTTPError as e:
                        ok = False
                        failures[type(e).__name__] = failures.get(type(e).__name__, 0) + 1
                    if ok:
                        latencies[path].append(time.monotonic() - t0)
                    else:
                        failures["status"] = failures.get("status", 0) + 1

            await asyncio.gather(*(client(i) for i in range(clients)))
        return {"latencies": latencies, "failures": failures}

    out.put(json.dumps(asyncio.run(main())))


def load_httpx(url: str, args: Any, paths: tuple[str, ...], pid: int
               ) -> tuple[dict[str, Any], float, dict[str, Any]]:
    """The load from ``args.procs`` processes of httpx clients (``load``): the scrape and
    daemon CPU at its start, and the latencies, summarised as ``load_ab`` does."""
    spawn = multiprocessing.get_context("spawn")
    queue: Any = spawn.Queue()
    share = [args.clients // args.procs + (i < args.clients % args.procs)
             for i in range(args.procs)]
    gens = [spawn.Process(target=load, args=(url, n, args.duration, queue, paths))
            for n in share]
    for gen in gens:
        gen.start()
    time.sleep(1.0)  # the generators' interpreters start
    start, cpu0 = scrape(url), cpu_seconds(pid)
    parts = [json.loads(queue.get(timeout=args.duration + 120)) for _ in gens]
    for gen in gens:
        gen.join(30)
    latencies: dict[str, list[float]] = {p: [] for p in paths}
    failures: dict[str, int] = {}
    for part in parts:
        for path, values in part["latencies"].items():
            latencies[path].extend(values)
        for kind, n in part["failures"].items():
            failures[kind] = failures.get(kind, 0) + n
    summary = {p: {"requests": float(len(v)), "50%": pct(v, 0.5), "99%": pct(v, 0.99)}
               for p, v in latencies.items()}
    return start, cpu0, {"summary": summary, "failures": failures}


def load_ab(url: str, clients: int, duration: float, paths: tuple[str, ...]
            ) -> dict[str, Any]:
    """The same load with ApacheBench (``ab -k``, Debian's apache2-utils): one ``ab``
    per path with its share of the clients, keep-alive, for ``duration`` seconds. ab is
    C and single-threaded, so the generator takes far less CPU than Python clients
    (which, on 2 cores, starve the daemon and measure themselves). ab counts answers of
    another length than the first as "failed (Length)": the answers change, so those
    are not failures and are left out."""
    procs = {}
    for i, path in enumerate(paths):
        share = clients // len(paths) + (i < clients % len(paths))
        procs[path] = subprocess.Popen(
            ["ab", "-q", "-k", "-c", str(share), "-t", str(int(duration)), "-n", "100000000",
             "-H", f"Authorization: Bearer {TOKEN}", url + path],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out: dict[str, Any] = {"summary": {}, "failures": {}}
    for path, proc in procs.items():
        text, _ = proc.communicate(timeout=duration + 60)
        figures: dict[str, float] = {}
        for line in text.splitlines():
            words = line.split()
            if line.startswith("Complete requests:"):
                figures["requests"] = float(words[-1])
            elif line.startswith("Non-2xx responses:"):
                out["failures"][f"{path} non-2xx"] = int(words[-1])
            elif line.strip().startswith("(Connect:"):  # ab's breakdown of failures:
                # "Length" only says bodies differ in size (the answers change): not one
                for kind, n in zip(words[::2], words[1::2], strict=False):
                    if kind.strip("(:,") not in ("Length",) and int(n.strip(",)")):
                        out["failures"][f"{path} {kind.strip('(:,')}"] = int(n.strip(",)"))
            elif len(words) == 2 and words[0] in ("50%", "99%"):
                figures[words[0]] = float(words[1]) / 1000
        if "requests" not in figures:
            sys.exit(f"ab failed on {path}:\n{text[-2000:]}")
        out["summary"][path] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--monitors", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--interval", default="5s")
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of no load then load (medians, pooled p99)")
    parser.add_argument("--generator", choices=("ab", "httpx"),
                        default="ab" if shutil.which("ab") else "httpx",
                        help="ab (ApacheBench, when installed) or Python httpx clients")
    parser.add_argument("--procs", type=int, default=2,
                        help="load generator processes the clients are split over")
    parser.add_argument("--paths", default="/metrics,/v1/monitors",
                        help="endpoints the clients go round (e.g. /healthz for a floor)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="monitors-http-bench-") as tmp:
        root = make_repo(Path(tmp), args.monitors, args.interval)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "MONITORS_HTTP_LISTEN": f"127.0.0.1:{port}",
               "MONITORS_TOKEN": TOKEN}
        if os.environ.get("BENCH_DAEMON_LOG"):  # keep the daemon's log (asyncio debug, ...)
            tmp_log = Path(os.environ["BENCH_DAEMON_LOG"])
        else:
            tmp_log = Path(tmp) / "daemon.log"
        log = open(tmp_log, "wb")  # noqa: SIM115
        daemon = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "--root", str(root), "--device", "bench",
             "run"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
        try:
            import httpx

            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or daemon.poll() is not None:
                    sys.exit("the daemon did not become ready:\n"
                             + tmp_log.read_text()[-3000:])
                time.sleep(0.2)
            print(f"daemon ready at {url}; waiting for every first poll", file=sys.stderr)
            while scrape(url)["polls"] < args.monitors:  # every first poll done
                time.sleep(0.5)
            print(f"measuring: {args.rounds} rounds of no load, then load", file=sys.stderr)
            time.sleep(2.0)
            paths = tuple(args.paths.split(","))
            rounds = []
            probe = Probe(args.monitors / durations_seconds(args.interval))
            time.sleep(0.5)
            for _ in range(args.rounds):
                idle0, cpu_start = scrape(url), cpu_seconds(daemon.pid)
                probe.mark()
                time.sleep(args.duration)
                floor_idle = probe.mark()
                idle1, cpu_idle = scrape(url), cpu_seconds(daemon.pid) - cpu_start
                if args.generator == "ab":
                    busy0, cpu0 = scrape(url), cpu_seconds(daemon.pid)
                    result = load_ab(url, args.clients, args.duration, paths)
                else:
                    busy0, cpu0, result = load_httpx(url, args, paths, daemon.pid)
                floor_busy = probe.mark()
                busy1, cpu1 = scrape(url), cpu_seconds(daemon.pid)
                rounds.append({"idle": (idle0, idle1), "busy": (busy0, busy1),
                               "floor": (floor_idle, floor_busy),
                               "cpu_idle": cpu_idle, "cpu_busy": cpu1 - cpu0,
                               "result": result})
                time.sleep(1.0)  # the load's last answers drain
            probe.close()
        finally:
            daemon.terminate()
            daemon.wait(30)
            log.close()
    print(f"daemon: {args.monitors} file monitors every {args.interval}; load: "
          f"{args.clients} clients ({args.generator}) for {args.duration:g}s on "
          f"{', '.join(paths)}; {args.rounds} rounds of no load then load")
    cpu_idle = statistics.median(r["cpu_idle"] for r in rounds)
    cpu_busy = statistics.median(r["cpu_busy"] for r in rounds)
    print(f"daemon CPU (median of rounds): {100 * cpu_idle / args.duration:.0f}% of a core "
          f"without load, {100 * cpu_busy / args.duration:.0f}% under load")
    print(f"{'endpoint':<16}{'requests':>10}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
          "   (median of rounds)")
    for path in paths:
        figures = [r["result"]["summary"][path] for r in rounds]
        n = statistics.median(f["requests"] for f in figures)
        p50 = statistics.median(f["50%"] for f in figures)
        p99 = statistics.median(f["99%"] for f in figures)
        print(f"{path:<16}{n:>10.0f}{n / args.duration:>9.0f}{p50 * 1000:>9.1f}"
              f"{p99 * 1000:>9.1f}")
    for i, r in enumerate(rounds):
        if r["result"]["failures"]:
            print(f"round {i + 1} failures: {r['result']['failures']}")
    print(f"{'poll lateness':<16}{'polls':>10}{'p50 ms':>9}{'p99 ms':>9}")
    ratios: list[float] = []
    floor_ratios: list[float] = []
    for i, r in enumerate(rounds):
        p99s = []
        for label in ("idle", "busy"):
            a, b = r[label]
            p50 = quantile(a["buckets"], b["buckets"], 0.5)
            p99 = quantile(a["buckets"], b["buckets"], 0.99)
            p99s.append(p99)
            name = f"{i + 1} {'no load' if label == 'idle' else 'under load'}"
            print(f"{name:<16}{b['polls'] - a['polls']:>10.0f}{p50 * 1000:>9.1f}"
                  f"{p99 * 1000:>9.1f}")
        ratios.append(p99s[1] / p99s[0])
        idle_floor, busy_floor = r["floor"]
        floor_ratios.append(busy_floor["p99"] / idle_floor["p99"])
        print(f"{i + 1} floor (bare asyncio timers, same rate): p99 "
              f"{idle_floor['p99'] * 1000:.1f} -> {busy_floor['p99'] * 1000:.1f} ms")
    pooled = []
    for label in ("idle", "busy"):
        before = {e: sum(r[label][0]["buckets"][e] for r in rounds) for e in
                  rounds[0][label][1]["buckets"]}
        after = {e: sum(r[label][1]["buckets"][e] for r in rounds) for e in before}
        pooled.append(quantile(before, after, 0.99))
    print(f"lateness p99 under load / no load: per round "
          f"{', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}x; "
          f"pooled p99 {pooled[0] * 1000:.1f} -> {pooled[1] * 1000:.1f} ms = "
          f"{pooled[1] / pooled[0]:.2f}x (goal < 2x)")
    print(f"floor (a bare asyncio process on the same machine) p99 under load / no load: "
          f"median {statistics.median(floor_ratios):.2f}x; the daemon's median over the "
          f"floor's: {statistics.median(ratios) / statistics.median(floor_ratios):.2f}")


if __name__ == "__main__":
    main()
