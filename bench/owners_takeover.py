"""Failover owners: takeover time and etcd round-trips per fire, on a real etcd.

Starts etcd (``/usr/bin/etcd``, Debian's ``etcd-server``) on free loopback ports and two
real daemons (devices ``a`` and ``b``) on temp repositories sharing one ``owners:``
monitor (a ``poll`` of one file every ``--interval``, a ``webhook-out`` action to a
loopback receiver), then measures:

* **SIGTERM**: from the signal to the standby owning the holder key in etcd (read
  with a range every 5 ms), and to the standby delivering an event written at the
  moment of the signal. Goal: under 1 s.
* **kill -9**: the same after SIGKILL. Goal: under TTL + one poll interval.
* **round-trips**: etcd's own request counters (``grpc_server_handled_total`` on its
  ``/metrics``) per poll without a fire and per poll with a fire, with the standby
  stopped (so its contention attempts are not counted); keepalives separately.

Usage::

    .venv/bin/python bench/owners_takeover.py            # 5 rounds each, ttl 3s
    .venv/bin/python bench/owners_takeover.py --rounds 3 --ttl 2s --interval 500ms

Medians (and max) of what one run sees; these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler import durations  # noqa: E402

NAME = "shared"
PREFIX = "/bench/"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.005) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(step)


class Receiver:
    def __init__(self) -> None:
        self.seen: dict[str, float] = {}  # observation -> monotonic arrival
        seen = self.seen

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.setdefault(body["observation"].strip(), time.monotonic())
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


class Bench:
    def __init__(self, base: Path, ttl: str, interval: str) -> None:
        exe = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(exe).exists():
            raise SystemExit("no etcd binary: apt-get install etcd-server")
        self.base = base
        port, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{port}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.etcd = subprocess.Popen(
            [exe, "--name", "b", "--data-dir", str(base / "etcd"), "--listen-client-urls",
             self.etcd_url, "--advertise-client-urls", self.etcd_url, "--listen-peer-urls",
             peer_url, "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
             f"b={peer_url}", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait(self._healthy, 20, "etcd")
        self.receiver = Receiver()
        self.event = base / "event.txt"
        self.event.write_text("v0\n")
        self.procs: dict[str, subprocess.Popen[bytes] | None] = {}
        self.interval = durations.parse(interval)
        self.ttl = durations.parse(ttl)
        for device in ("a", "b"):
            root = base / device
            (root / "monitors.d").mkdir(parents=True)
            (root / "monitors.toml").write_text(
                f'[etcd]\nendpoints = ["{self.etcd_url}"]\nprefix = "{PREFIX}"\n'
                f'ttl = "{ttl}"\n')
            (root / "monitors.d" / f"{NAME}.yml").write_text(
                f"name: {NAME}\nsource: {{type: poll, command: [cat, \"{self.event}\"], "
                f"interval: {interval}}}\naction: {{type: webhook-out, url: "
                f"\"{self.receiver.url}\"}}\nowners: [a, b]\n")
            self.procs[device] = None
        self.http = httpx.Client(timeout=2)
        self.counter = 0

    def _healthy(self) -> bool:
        try:
            return bool(httpx.get(self.etcd_url + "/health", timeout=1).json()["health"]
                        == "true")
        except (httpx.HTTPError, ValueError, KeyError):
            return False

    def start(self, device: str) -> None:
        root = self.base / device
        log = open(self.base / f"daemon-{device}.log", "ab")  # noqa: SIM115 (kept open)
        self.procs[device] = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "--root", str(root), "--state-dir",
             str(root / ".history"), "--device", device, "run"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "MONITORS_HTTP_LISTEN": ""})

    def holder(self) -> str | None:
        key = base64.b64encode(f"{PREFIX}{NAME}/holder".encode()).decode()
        try:
            kvs = self.http.post(self.etcd_url + "/v3/kv/range",
                                 json={"key": key}).json().get("kvs") or []
        except (httpx.HTTPError, ValueError):
            return None
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def emit(self) -> str:
        self.counter += 1
        value = f"e{self.counter}"
        self.event.write_text(value + "\n")
        return value

    def delivered(self, value: str, timeout: float) -> float:
        return float(wait(lambda: self.receiver.seen.get(value), timeout, f"{value}"))

    def settle(self) -> str:
        """Both daemons up, one holder that has checked (a change now would fire)."""
        for device, proc in self.procs.items():
            if proc is None or proc.poll() is not None:
                self.start(device)
        holder = str(wait(self.holder, 30, "a holder", step=0.05))
        value = self.emit()
        self.delivered(value, 30)
        return holder

    def takeover(self, sig: signal.Signals) -> tuple[float, float]:
        holder = self.settle()
        time.sleep(self.interval)  # the standby is up and contending too
        proc = self.procs[holder]
        assert proc is not None
        sent = time.monotonic()
        os.killpg(proc.pid, sig)
        value = self.emit()
        other = "b" if holder == "a" else "a"
        wait(lambda: self.holder() == other, 60, "takeover")
        took = time.monotonic() - sent
        arrived = self.delivered(value, 60) - sent
        proc.wait(timeout=30)
        self.procs[holder] = None
        return took, arrived

    def etcd_counts(self) -> dict[str, float]:
        counts: dict[str, float] = {}
        for line in httpx.get(self.etcd_url + "/metrics", timeout=5).text.splitlines():
            if line.startswith("grpc_server_handled_total{"):
                method = line.split('grpc_method="')[1].split('"')[0]
                counts[method] = counts.get(method, 0.0) + float(line.rsplit(" ", 1)[1])
        return counts

    def round_trips(self, seconds: float) -> dict[str, float]:
        holder = self.settle()
        other = "b" if holder == "a" else "a"
        proc = self.procs[other]
        assert proc is not None
        proc.terminate()
        proc.wait(timeout=30)
        self.procs[other] = None
        out: dict[str, float] = {}
        for phase, firing in (("quiet", False), ("firing", True)):
            before = self.etcd_counts()
            fires = 0
            started = time.monotonic()
            end = started + seconds
            while time.monotonic() < end:
                if firing:
                    value = self.emit()
                    self.delivered(value, 10)
                    fires += 1
                else:
                    time.sleep(0.1)
            after = self.etcd_counts()
            elapsed = time.monotonic() - started
            out[f"{phase}_txn_per_second"] = (after.get("Txn", 0) - before.get("Txn", 0)) \
                / elapsed
            out[f"{phase}_keepalives"] = (after.get("LeaseKeepAlive", 0)
                                          - before.get("LeaseKeepAlive", 0))
            out[f"{phase}_seconds"] = elapsed
            out["fires"] = fires
        quiet = out["quiet_txn_per_second"]
        out["txn_per_poll"] = quiet * self.interval
        # a fire's poll: its admission (as any poll) plus what the fire adds
        extra = (out["firing_txn_per_second"] - quiet) * out["firing_seconds"] / max(1, fires)
        out["txn_per_fire"] = out["txn_per_poll"] + extra
        return out

    def close(self) -> None:
        for proc in self.procs.values():
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        self.etcd.terminate()
        self.etcd.wait()
        self.receiver.server.shutdown()


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f}s  max {max(values):.3f}s  (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ttl", default="3s")
    parser.add_argument("--interval", default="1s")
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="length of each round-trip phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="owners-bench-") as tmp:
        bench = Bench(Path(tmp), args.ttl, args.interval)
        try:
            term = [bench.takeover(signal.SIGTERM) for _ in range(args.rounds)]
            kill = [bench.takeover(signal.SIGKILL) for _ in range(args.rounds)]
            trips = bench.round_trips(args.seconds)
        finally:
            bench.close()
    ttl, interval = bench.ttl, bench.interval
    print(f"etcd {bench.etcd_url}, ttl {ttl:g}s, poll interval {interval:g}s, "
          f"{args.rounds} rounds each")
    print(f"SIGTERM  key taken:        {summary([t for t, _ in term])}   goal < 1s")
    print(f"SIGTERM  event delivered:  {summary([a for _, a in term])}")
    print(f"kill -9  key taken:        {summary([t for t, _ in kill])}   "
          f"goal < ttl + interval = {ttl + interval:g}s")
    print(f"kill -9  event delivered:  {summary([a for _, a in kill])}")
    print(f"etcd Txn per poll (no fire): {trips['txn_per_poll']:.2f}   "
          f"etcd Txn per fire (its poll included): {trips['txn_per_fire']:.2f} "
          f"({trips['fires']:.0f} fires)")
    print(f"keepalives in {args.seconds:g}s: {trips['quiet_keepalives']:.0f} "
          f"(one per ttl/3 = {ttl / 3:g}s)")


if __name__ == "__main__":
    main()
