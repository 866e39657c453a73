"""`laya serve` under concurrent load over loopback: requests/s and p50/p99, dynamic batching off vs on.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_serve.py [--shapes tiny[,base]] [--clients 1,8,32,128]
        [--max-requests 3000] [--max-seconds 12] [--window-ms 2] [--device cpu] [--checkpoint-dir DIR] [--out PATH]

For each shape the server runs as its own process (uvicorn, `python -m laya.serve.main`) on a random
checkpoint of scripts/make_checkpoint.py built in a temporary directory (never inside the repository),
once with `--no-batching` and once with batching on. A closed-loop load generator (C clients over
keep-alive connections, each sending its next request when the last one is answered; a tiny HTTP/1.1
client on asyncio streams so the generator itself stays cheap) runs every cell until it has sent
--max-requests or --max-seconds have passed, after a short warm-up. One request = 1 state x 3
questions (choice, score, noul), so decisions/s = 3 x requests/s. Mean states per forward comes from
the server's own /metrics. The JSON (benchmarks/results/serve_<device>_<date>.json) records the CPU,
cores, versions, date, the 1-minute load average around every cell (other work on the machine shows
up there), and every cell. Batching-on vs -off ratios are computed within the same run.

Note: on a CPU box the generator and the server share the cores; the numbers are end-to-end through
loopback HTTP, not model throughput alone.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, HERE)
from _env import cpu_model  # noqa: E402  (one definition for every benchmark)

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
TOPICS = ["refund for a broken blender", "login fails after the update", "invoice shows the wrong VAT",
          "cancel the premium plan", "package arrived damaged", "charged twice this month",
          "password reset mail never comes", "app crashes when uploading photos"]
STATES = [f"Ticket {i}: {TOPICS[i % len(TOPICS)]}. " + "The customer explains the problem at length. " * (1 + i % 4)
          for i in range(32)]


# ---- environment -----------------------------------------------------------------------------------

def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "fastapi", "starlette", "uvicorn", "prometheus-client", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    try:
        out["laya_commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                                            text=True, timeout=10).stdout.strip() or None
    except OSError:
        out["laya_commit"] = None
    return out


# ---- server process --------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(checkpoint: str, port: int, batching: bool, window_ms: float, device: str,
                 threads: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "laya.serve.main", "--host", "127.0.0.1", "--port", str(port),
           "--threads", str(threads),
           "--model", f"bench={checkpoint}", "--default-model", "bench", "--models", "bench", "--device", device,
           "--max-concurrent", "1024", "--max-queue-rows", "100000", "--log-level", "warning",
           "--batch-window-ms", str(window_ms)]
    if not batching:
        cmd.append("--no-batching")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): {proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if json.loads(r.read()).get("loaded"):
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not become ready within 120 s")


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for name in ("laya_batch_items_sum", "laya_batch_items_count"):
        m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


# ---- load generator --------------------------------------------------------------------------------

class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and the body."""

    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None

    async def post(self, path: str, body: bytes, retry: bool = True) -> int:
        fresh = self.writer is None
        if fresh:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:  # the server closed an idle keep-alive connection: reconnect once
            await self.close()
            if fresh or not retry:
                raise ConnectionResetError("the server closed the connection")
            return await self.post(path, body, retry=False)
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            if key.lower() == "content-length":
                length = int(value)
            elif key.lower() == "connection" and "close" in value.lower():
                close = True
        await self.reader.readexactly(length)
        if close:
            await self.close()
        return int(status_line.split()[1])

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def load(port: int, clients: int, max_requests: int, max_seconds: float, warmup: int) -> dict:
    bodies = [json.dumps({"state": s, "questions": QUESTIONS, "model": "bench"}).encode() for s in STATES]
    latencies: list[float] = []
    errors = 0
    sent = 0
    conns = [Connection(port) for _ in range(clients)]

    async def one_client(k: int, deadline: float, budget: list, record: bool) -> None:
        nonlocal errors, sent
        i = k
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            start = time.perf_counter()
            try:
                status = await conns[k].post("/v1/systemone", bodies[i % len(bodies)])
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                status = 0
                await conns[k].close()
            if record:
                sent += 1
                if status == 200:
                    latencies.append(time.perf_counter() - start)
                else:
                    errors += 1
            i += clients

    warm = [max(warmup, clients)]
    await asyncio.gather(*(one_client(k, time.perf_counter() + 30, warm, False) for k in range(clients)))
    for c in conns:  # fresh connections for the timed part (idle ones may have hit the keep-alive timeout)
        await c.close()
    budget = [max_requests]
    start = time.perf_counter()
    deadline = start + max_seconds
    await asyncio.gather(*(one_client(k, deadline, budget, True) for k in range(clients)))
    wall = time.perf_counter() - start
    for c in conns:
        await c.close()
    lat = sorted(latencies)

    def pct(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else None

    return {"clients": clients, "requests": sent, "ok": len(lat), "errors": errors, "seconds": round(wall, 3),
            "requests_per_s": round(len(lat) / wall, 1), "decisions_per_s": round(3 * len(lat) / wall, 1),
            "p50_ms": pct(0.50), "p99_ms": pct(0.99), "mean_ms": round(statistics.mean(lat) * 1000, 2) if lat else None}


# ---- driver ----------------------------------------------------------------------------------------

def run_shape(shape: str, checkpoint: str, args: argparse.Namespace) -> list[dict]:
    cells = []
    for batching in (False, True):
        port = free_port()
        proc = start_server(checkpoint, port, batching, args.window_ms, args.device, args.server_threads)
        try:
            for clients in args.clients:
                before, load_before = scrape(port), os.getloadavg()[0]
                cell = asyncio.run(load(port, clients, args.max_requests, args.max_seconds, args.warmup))
                after, load_after = scrape(port), os.getloadavg()[0]
                forwards = after["laya_batch_items_count"] - before["laya_batch_items_count"]
                items = after["laya_batch_items_sum"] - before["laya_batch_items_sum"]
                cell.update(shape=shape, batching=batching, mean_states_per_forward=round(items / forwards, 2)
                            if forwards else None, loadavg_1m=[round(load_before, 2), round(load_after, 2)])
                cells.append(cell)
                print(f"{shape:5s} batching={'on ' if batching else 'off'} clients={clients:4d}  "
                      f"{cell['requests_per_s']:8.1f} req/s  {cell['decisions_per_s']:8.1f} dec/s  "
                      f"p50 {cell['p50_ms']} ms  p99 {cell['p99_ms']} ms  errors {cell['errors']}  "
                      f"states/forward {cell['mean_states_per_forward']}", flush=True)
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return cells


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="tiny")
    p.add_argument("--clients", default="1,8,32,128")
    p.add_argument("--max-requests", type=int, default=3000, help="per cell (after warm-up)")
    p.add_argument("--max-seconds", type=float, default=12.0, help="per cell (after warm-up)")
    p.add_argument("--warmup", type=int, default=20, help="requests per cell before timing (at least one per client)")
    p.add_argument("--window-ms", type=float, default=2.0, help="batching window when batching is on")
    p.add_argument("--device", default="cpu")
    p.add_argument("--server-threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                   help="torch intra-op threads in the server (default: half the cores; the generator needs the rest)")
    p.add_argument("--checkpoint-dir", default=None, help="where to build/reuse the checkpoints (default: temp)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    # a SIGTERM (e.g. from `timeout`) unwinds through the finally blocks, so no server process is left behind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.clients = [int(c) for c in args.clients.split(",")]
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]

    from make_checkpoint import make_checkpoint

    started = dt.datetime.now(dt.timezone.utc)
    cells = []
    with tempfile.TemporaryDirectory(prefix="laya-bench-serve-") as tmp:
        root = args.checkpoint_dir or tmp
        for shape in shapes:
            path = os.path.join(root, shape)
            if not os.path.isfile(os.path.join(path, "model.safetensors")):
                make_checkpoint(path, shape, "wordpiece", seed=7, std=0.3)
            cells.extend(run_shape(shape, path, args))

    speedups = {}
    for shape in shapes:
        for clients in args.clients:
            off = next(c for c in cells if c["shape"] == shape and c["clients"] == clients and not c["batching"])
            on = next(c for c in cells if c["shape"] == shape and c["clients"] == clients and c["batching"])
            if off["requests_per_s"]:
                speedups[f"{shape}/{clients}"] = round(on["requests_per_s"] / off["requests_per_s"], 2)
    result = {
        "benchmark": "bench_serve", "date": started.isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform()},
        "versions": versions(), "device": args.device,
        "settings": {"clients": args.clients, "max_requests": args.max_requests, "max_seconds": args.max_seconds,
                     "warmup": args.warmup, "window_ms": args.window_ms, "questions_per_request": 3,
                     "server_threads": args.server_threads,
                     "server": "uvicorn, one process, one inference worker", "client": "asyncio HTTP/1.1 keep-alive"},
        "cells": cells, "batching_speedup_requests_per_s": speedups,
    }
    out = args.out or os.path.join(HERE, "results", f"serve_{args.device.split(':')[0]}_{started:%Y-%m-%d}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"speed-up batching on/off (req/s): {speedups}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
