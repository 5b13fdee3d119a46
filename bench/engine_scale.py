"""Engine scale benchmark: scheduled vs achieved polls, lateness, CPU, memory, floors.

Runs each scenario in a fresh child process (so CPU and memory are its own), for a
bounded time, and prints one table plus the floors measured in the same run:

* ``idle``: N monitors at interval I with an in-memory source that returns a
  constant (scheduler + decide + liveness, no I/O per poll);
* ``http``: N ``poll-http`` monitors against a loopback HTTP server (a separate
  process), and a saturation run compared with a bare loop of pooled httpx GETs
  at the same in-flight cap (the floor);
* ``command``: N ``poll`` monitors running ``sh -c 'echo x'``, compared with a
  bare loop of asyncio ``sh -c`` spawns (the floor).

Usage::

    .venv/bin/python bench/engine_scale.py            # full run (~2 minutes)
    .venv/bin/python bench/engine_scale.py --quick    # smaller, ~40 s
    .venv/bin/python bench/engine_scale.py --only idle --repeat 5   # 10k@1s, medians
    .venv/bin/python bench/engine_scale.py --only http --repeat 5   # engine/httpx ratios

``--only idle`` runs the scheduler floor and the 10,000-monitor idle engine ``--repeat``
times, alternating, and prints the medians (CPU, p99 lateness, memory per monitor) and
the start-up times (a start-up stall shows as a start-up of minutes). ``--only http``
runs the saturated engine and the bare pooled httpx loop at caps 4 and 25 ``--repeat``
times, in pairs (the order alternates), and prints the medians and spread of the pairs'
ratios (goal >= 0.8) and of each side's CPU per request (``only_http``).

Figures are medians of what one run sees; these machines are shared and noisy, so
compare ratios within a run rather than absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- the loopback HTTP server (its own process) ------------------------------------

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class _Http(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t: Any = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.t.write(RESPONSE)


def serve(port_file: str) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Http, "127.0.0.1", 0, backlog=4096)
        port = server.sockets[0].getsockname()[1]
        Path(port_file).write_text(str(port))
        await asyncio.Event().wait()

    asyncio.run(main())


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port_file = tempfile.mktemp()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", port_file])
    deadline = time.monotonic() + 10
    while not (os.path.exists(port_file) and Path(port_file).read_text()):
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    return proc, f"http://127.0.0.1:{Path(port_file).read_text()}/"


# -- scenarios (child processes) --------------------------------------------------


class NullDispatcher:
    async def dispatch(self, monitor: Any, event: Any) -> None:
        return None


class ConstantSource:
    """An in-memory source: the same observation every time (its class is imported once,
    not on every poll: the figure is the engine's cost, not this stand-in's)."""

    def __init__(self) -> None:
        from reconciler.model import Observation

        self.observation = Observation

    async def observe(self, monitor: Any, ctx: Any) -> Any:
        return self.observation("steady")


async def run_engine(kind: str, n: int, interval: float, duration: float, url: str,
                     cap: int = 0) -> dict[str, Any]:
    from reconciler.config import normalize
    from reconciler.daemon import evaluator
    from reconciler.sources import context as source_context
    from reconciler.sources import poll as poll_source
    from reconciler.state import store as store_mod

    if kind in ("idle", "idle-task"):
        poll_source.observe = ConstantSource().observe  # type: ignore[method-assign]
    if kind == "idle":
        # It answers without waiting, so it declares what such a source type declares
        # (``sources.registry.EAGER``; ``pid`` does): its polls need no task. As
        # ``idle-task`` it does not: each poll is a task, as a command, file or HTTP
        # source's poll is (they wait on a child, a thread or a socket).
        poll_source.EAGER = True  # type: ignore[attr-defined]
    state = Path(tempfile.mkdtemp(prefix="bench-state-"))
    store = store_mod.Store(state)
    ctx = source_context.SourceContext.create(
        store=store, http_in_flight=cap or source_context.HTTP_IN_FLIGHT)
    engine = evaluator.Engine(store, NullDispatcher(), ctx=ctx)
    every = f"{int(interval * 1000)}ms"
    if kind == "http":
        src: dict[str, Any] = {"type": "poll-http", "url": url, "interval": every}
    else:
        src = {"type": "poll", "command": "echo x", "interval": every}
    monitors = [normalize.monitor({"source": src, "action": {"type": "notify"}},
                                  name=f"m{i}") for i in range(n)]
    rss0 = rss_kb()
    for m in monitors:
        await engine.start(m)
    # Warm up: every first poll done and its baseline durably written, then one interval.
    t_start = time.monotonic()
    await engine.wait_first_poll([m.name for m in monitors], 300)
    # Baselines are durable writes; wait until they are done (bounded: a saturated
    # run always has busy monitors).
    settle = time.monotonic() + 30
    while any(e.busy for e in engine._entries.values()) and time.monotonic() < settle \
            and interval >= 1.0:
        await asyncio.sleep(0.05)
    if interval < 1.0:
        await asyncio.sleep(2.0)  # saturated: let the baseline writes drain
    startup = time.monotonic() - t_start
    await asyncio.sleep(interval)
    engine.stats.lateness.clear()
    polls0, skipped0 = engine.stats.polls, engine.stats.skipped
    checks0 = sum(e.polls for e in engine._entries.values())  # completed checks
    missed0 = engine.stats.missed
    cpu0, child0, t0 = cpu_self(), cpu_children(), time.monotonic()
    await asyncio.sleep(duration)
    elapsed = time.monotonic() - t0
    cpu = cpu_self() - cpu0
    child = cpu_children() - child0
    polls = engine.stats.polls - polls0
    checks = sum(e.polls for e in engine._entries.values()) - checks0
    late = [x * 1000 for x in engine.stats.lateness]
    rss1 = rss_kb()
    errors_ = sum(int((store.liveness(m.name) or {}).get("consecutiveErrors") or 0) > 0
                  for m in monitors)
    await engine.close()
    await ctx.aclose()
    return {
        "scenario": kind, "n": n, "interval": interval, "seconds": round(elapsed, 2),
        "startup_s": round(startup, 2),
        "scheduled_per_s": round(n / interval, 1),
        "achieved_per_s": round(polls / elapsed, 1),
        "completed_per_s": round(checks / elapsed, 1),
        "skipped": engine.stats.skipped - skipped0,
        "missed": engine.stats.missed - missed0,
        "late_p50_ms": round(pct(late, 0.5), 3), "late_p99_ms": round(pct(late, 0.99), 3),
        "late_max_ms": round(max(late) if late else float("nan"), 3),
        "cpu_pct_core": round(100 * cpu / elapsed, 1),
        "children_cpu_pct": round(100 * child / elapsed, 1),
        "kb_per_monitor": round((rss1 - rss0) / n, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "monitors_in_error": errors_,
    }


async def run_scheduler(n: int, interval: float, duration: float) -> dict[str, Any]:
    """The scheduler alone: N keys at ``interval``, the callback only reschedules."""
    import zlib

    from reconciler.daemon.scheduler import Scheduler

    loop = asyncio.get_running_loop()
    late: list[float] = []
    count = 0

    def due(key: int, at: float) -> None:
        nonlocal count
        count += 1
        late.append(loop.time() - at)
        sched.schedule(key, at + interval, interval)  # as the engine does: its lane

    rss0 = rss_kb()
    sched: Scheduler[int] = Scheduler(due)
    now = loop.time()
    for i in range(n):
        sched.schedule(i, now + zlib.crc32(f"m{i}".encode()) / 2**32 * interval)
    await asyncio.sleep(interval)
    late.clear()
    count = 0
    cpu0, t0 = cpu_self(), time.monotonic()
    await asyncio.sleep(duration)
    elapsed = time.monotonic() - t0
    cpu = cpu_self() - cpu0
    ms = [x * 1000 for x in late]
    sched.close()
    return {"scenario": "scheduler only (no poll work)", "n": n, "interval": interval,
            "scheduled_per_s": round(n / interval, 1), "achieved_per_s": round(count / elapsed, 1),
            "late_p50_ms": round(pct(ms, 0.5), 3), "late_p99_ms": round(pct(ms, 0.99), 3),
            "late_max_ms": round(max(ms), 3), "cpu_pct_core": round(100 * cpu / elapsed, 1),
            "kb_per_monitor": round((rss_kb() - rss0) / n, 2)}


async def floor_http(url: str, in_flight: int, duration: float) -> dict[str, Any]:
    """The peer: ``in_flight`` loops of GETs on one pooled httpx client, configured as the
    engine's (``SourceContext.http``: pool of ``in_flight``, no proxy from the
    environment, no redirects), the URL parsed once, each body read whole."""
    import httpx

    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    target = httpx.URL(url)
    count = 0
    async with httpx.AsyncClient(limits=limits, trust_env=False,
                                 follow_redirects=False) as client:
        stop = time.monotonic() + duration
        cpu0, t0 = cpu_self(), time.monotonic()

        async def worker() -> None:
            nonlocal count
            while time.monotonic() < stop:
                r = await client.get(target)
                await r.aread()
                count += 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.monotonic() - t0
    return {"scenario": f"floor: bare httpx GET, {in_flight} in flight",
            "achieved_per_s": round(count / elapsed, 1), "seconds": round(elapsed, 2),
            "cpu_pct_core": round(100 * (cpu_self() - cpu0) / elapsed, 1)}


async def floor_spawn(parallel: int, duration: float) -> dict[str, Any]:
    count = 0
    stop = time.monotonic() + duration
    cpu0, child0, t0 = cpu_self(), cpu_children(), time.monotonic()

    async def worker() -> None:
        nonlocal count
        while time.monotonic() < stop:
            p = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", "echo x", stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)
            await p.communicate()
            count += 1

    await asyncio.gather(*(worker() for _ in range(parallel)))
    elapsed = time.monotonic() - t0
    return {"scenario": f"floor: bare sh -c spawns, {parallel} parallel",
            "achieved_per_s": round(count / elapsed, 1),
            "cpu_pct_core": round(100 * (cpu_self() - cpu0) / elapsed, 1),
            "children_cpu_pct": round(100 * (cpu_children() - child0) / elapsed, 1)}


def child_main(args: argparse.Namespace) -> None:
    if args.scenario == "sched":
        out = asyncio.run(run_scheduler(args.n, args.interval, args.duration))
    elif args.scenario == "floor-http":
        out = asyncio.run(floor_http(args.url, args.n, args.duration))
    elif args.scenario == "floor-spawn":
        out = asyncio.run(floor_spawn(args.n, args.duration))
    else:
        out = asyncio.run(run_engine(args.scenario, args.n, args.interval, args.duration,
                                     args.url, args.cap))
    print(json.dumps(out))


def child(scenario: str, n: int, interval: float, duration: float, url: str = "",
          cap: int = 0) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--scenario", scenario, "--n", str(n),
           "--interval", str(interval), "--duration", str(duration), "--url", url,
           "--cap", str(cap)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{scenario} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


COLUMNS = ["scenario", "n", "interval", "startup_s", "scheduled_per_s", "achieved_per_s",
           "skipped", "missed", "late_p50_ms", "late_p99_ms", "late_max_ms", "cpu_pct_core",
           "children_cpu_pct", "kb_per_monitor", "monitors_in_error"]


def show(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        parts = [f"{k}={row[k]}" for k in COLUMNS if k in row]
        print("  " + "  ".join(parts))


def median_row(rows: list[dict[str, Any]], key: str) -> float:
    values = sorted(float(r[key]) for r in rows)
    return values[len(values) // 2] if len(values) % 2 else \
        (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2


def only_idle(repeat: int, d: float, n: int) -> None:
    scheds, idles, tasks = [], [], []
    for _ in range(repeat):
        scheds.append(child("sched", n, 1.0, d))
        idles.append(child("idle", n, 1.0, d))
        tasks.append(child("idle-task", n, 1.0, d))
    show(scheds + idles + tasks)
    print(f"idle engine, {n} monitors at 1s, medians of {repeat} runs (engine: a source "
          "answering at once, no task per poll; task: a task per poll, as a source that "
          "waits):")
    for key in ("cpu_pct_core", "late_p50_ms", "late_p99_ms", "kb_per_monitor"):
        print(f"  {key}: engine {median_row(idles, key):g}, task {median_row(tasks, key):g}, "
              f"scheduler-only floor {median_row(scheds, key):g}")
    starts = [r["startup_s"] for r in idles]
    print(f"  start-up (s): {', '.join(f'{x:g}' for x in starts)}; longest {max(starts):g}")


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spread(values: list[float]) -> str:
    """``median (min-max)`` of ``values``."""
    s = sorted(values)
    mid = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
    return f"{mid:.2f} ({s[0]:.2f}-{s[-1]:.2f})"


def only_http(repeat: int, d: float) -> None:
    """Engine vs bare pooled httpx at caps 4 and 25, ``repeat`` interleaved pairs each.

    Both sides talk to the same loopback server process with the same number of
    requests in flight and read every body. Each pair runs back to back (the order
    alternates), so a pair's ratio compares runs that saw the same machine; the
    medians of those ratios and their spread are the figures. CPU per request (of the
    engine's process, of the bare client's, and of the server's for each) moves much
    less than rates on a shared machine; the load average shows how shared it was.
    """
    server, url = start_server()
    lines = []
    try:
        for cap in (4, 25):
            pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
            for i in range(repeat):
                pair: dict[str, dict[str, Any]] = {}
                order = [("floor", ("floor-http", cap, 0, d, url)),
                         ("engine", ("http", 500, 0.25, d, url, cap))]
                for side, args in (order if i % 2 == 0 else order[::-1]):
                    cpu0 = proc_cpu(server.pid)
                    row = child(*args)  # type: ignore[arg-type]
                    # the engine's completed checks (polls started include queued ones)
                    rate = row["achieved_per_s"] = row.get("completed_per_s",
                                                           row["achieved_per_s"])
                    requests = rate * row["seconds"]
                    row["us_per_request"] = 1e4 * row["cpu_pct_core"] / rate
                    # the server also served the engine's warm-up: an upper bound there
                    row["server_us"] = 1e6 * (proc_cpu(server.pid) - cpu0) / requests
                    row["load"] = os.getloadavg()[0]
                    pair[side] = row
                pairs.append((pair["engine"], pair["floor"]))
            engines = [e for e, _ in pairs]
            floors = [f for _, f in pairs]
            rate = [e["achieved_per_s"] / f["achieved_per_s"] for e, f in pairs]
            eff = [f["us_per_request"] / e["us_per_request"] for e, f in pairs]
            lines += [
                f"  cap {cap}, {repeat} pairs, median (min-max):",
                f"    rate ratio engine/httpx: {spread(rate)}   "
                f"[engine {spread([e['achieved_per_s'] for e in engines])}/s, "
                f"httpx {spread([f['achieved_per_s'] for f in floors])}/s]",
                f"    CPU per request: engine "
                f"{spread([e['us_per_request'] for e in engines])} us, httpx "
                f"{spread([f['us_per_request'] for f in floors])} us; "
                f"httpx/engine {spread(eff)}",
                f"    CPU of a core: engine {spread([e['cpu_pct_core'] for e in engines])}%, "
                f"httpx {spread([f['cpu_pct_core'] for f in floors])}%",
                f"    server CPU per request: while the engine ran "
                f"{spread([e['server_us'] for e in engines])} us (warm-up included), "
                f"while httpx ran {spread([f['server_us'] for f in floors])} us",
                f"    load average (1 min) after each run: "
                f"{spread([r['load'] for r in engines + floors])}",
            ]
    finally:
        server.kill()
        server.wait()
    print("HTTP: engine saturated poll rate / bare pooled httpx at the same cap (goal >= 0.8);")
    print("CPU per request is the steadier figure on a shared machine:")
    print("\n".join(lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--serve")
    p.add_argument("--scenario")
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--url", default="")
    p.add_argument("--cap", type=int, default=0, help="HTTP in-flight cap (engine runs)")
    p.add_argument("--only", choices=("idle", "http"), help="one comparison, --repeat times")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.scenario:
        child_main(args)
        return
    d = 5.0 if args.quick else 10.0
    if args.only == "idle":
        only_idle(args.repeat, d, args.n or 10000)
        return
    if args.only == "http":
        only_http(args.repeat, d)
        return
    print(f"engine_scale: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"{socket.gethostname()}, {d:g}s per scenario")
    rows: list[dict[str, Any]] = []
    rows.append(child("sched", 10000, 1.0, d))
    rows.append(child("idle", 2000 if args.quick else 10000, 1.0, d))
    server, url = start_server()
    ratios: list[str] = []
    try:
        rows.append(child("http", 1000, 5.0, d, url))
        for cap in (4, 25):
            floors, engines = [], []
            for _ in range(1 if args.quick else 3):  # alternate, take medians
                floors.append(child("floor-http", cap, 0, d, url))
                engines.append(child("http", 500, 0.25, d, url, cap))
            floor = sorted(floors, key=lambda r: r["achieved_per_s"])[len(floors) // 2]
            sat = sorted(engines, key=lambda r: r["achieved_per_s"])[len(engines) // 2]
            sat["scenario"] = f"http saturated (2000/s scheduled), cap {cap} in flight"
            rows += [sat, floor]
            ratios.append(f"  cap {cap}: engine {sat['achieved_per_s']}/s vs bare httpx "
                          f"{floor['achieved_per_s']}/s = "
                          f"{sat['achieved_per_s'] / floor['achieved_per_s']:.2f} (medians)")
        rows.append(child("floor-http", 1, 0, d, url))
    finally:
        server.kill()
        server.wait()
    rows.append(child("command", 300, 1.0, d))
    rows.append(child("floor-spawn", 8, 0, d))
    show(rows)
    print("HTTP: engine saturated poll rate / bare httpx floor at the same cap:")
    for line in ratios:
        print(line)
    cmd = rows[-2]
    print(f"  command polls achieved {cmd['achieved_per_s']}/s of {cmd['scheduled_per_s']}/s "
          f"scheduled; bare spawn floor {rows[-1]['achieved_per_s']}/s")


if __name__ == "__main__":
    main()
