"""`laya serve` under concurrent load over loopback: decisions/s and p50/p99, dynamic batching off vs on.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_serve.py [--shapes tiny[,base,large]] [--device cpu|cuda]
        [--backends eager[,compile,tilelang,auto]] [--batching off,on] [--clients 1,8,32,128]
        [--rate-dps 1000 --rate-clients 128] [--max-requests 3000] [--max-seconds 12] [--time-budget-s 330]
        [--fairness [--fairness-seconds 12 --fairness-rate 20 --fairness-clients 32 --fairness-goal-p99-ms MS]]
        [--checkpoint-dir DIR] [--out PATH]

For each (shape, backend, batching) the server runs as its own process (uvicorn, `python -m laya.serve`) on
a random checkpoint of scripts/make_checkpoint.py (built in a temporary directory unless --checkpoint-dir holds
one), or on the bundled laya-mini (`--shapes laya-mini`). Three kinds of cell:

- closed loop (`mode: closed`): C clients over keep-alive connections, each sending its next request when the last
  one is answered, until --max-requests are sent or --max-seconds pass (after a warm-up). This is the most the
  server gives at C in flight; by Little's law its mean latency is C / requests/s.
- paced (`mode: rate`, batching on only, with --rate-dps): --rate-clients clients offer --rate-dps decisions/s
  on a fixed schedule for --max-seconds; latency counts from each request's scheduled start, so a server that
  falls behind shows it (no coordinated omission). This is the cell the serving goal is judged on:
  >= --goal-dps decisions/s at p99 <= --goal-p99-ms with --goal-clients clients.
- fairness (`mode: fairness`, batching on only, with --fairness): one client keeps a 64-state x 64-question batch
  (4,096 rows) in flight on /v1/systemone/batch while 1-question requests are paced at --fairness-rate/s for
  --fairness-seconds, timed from their scheduled starts as above. Goal: their p99 <= --fairness-goal-p99-ms
  (100 ms on cuda, 2,000 ms on cpu by default). The cell's `batch` holds the big requests' latencies and count.

One request = 1 state x 3 questions (choice, score, noul), so decisions/s = 3 x requests/s. Each cell's
`stages_ms` gives p50/p99/mean of the server's stages per answered request (its Server-Timing header: http, queue,
prep, forward, decode, wakeup, total), `outside` (the client latency less the server's total) and `tail`, each
stage's mean over the slowest 1% of requests: where the p99 goes. Mean states per
forward comes from the server's own /metrics, the backend actually installed from its /health. The JSON (--out,
default benchmarks/results/serve_<device>_<date>.json) records the GPU (nvidia-smi), CPU, versions, date, the
checkpoint shapes, every server and cell, and is rewritten after every cell, so a run cut short keeps what it
measured. --time-budget-s bounds the whole run: servers and cells that would not fit are skipped (and listed).
The last thing printed is a short table. On a CPU box the generator and the server share the cores: numbers are
end-to-end through loopback HTTP, not model throughput alone.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import platform
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, HERE)
sys.path.insert(1, REPO)  # the working tree's laya, as the server runs it
from _env import cpu_model, cpu_sample, git_revision, package_version, usable_cores  # noqa: E402

from laya.serve.limits import MAX_BATCH_STATES, MAX_QUESTIONS  # noqa: E402 - torch-free

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
DECISIONS_PER_REQUEST = len(QUESTIONS)
TOPICS = ["refund for a broken blender", "login fails after the update", "invoice shows the wrong VAT",
          "cancel the premium plan", "package arrived damaged", "charged twice this month",
          "password reset mail never comes", "app crashes when uploading photos"]
STATES = [f"Ticket {i}: {TOPICS[i % len(TOPICS)]}. " + "The customer explains the problem at length. " * (1 + i % 4)
          for i in range(32)]
SINGLE, BATCH = "/v1/systemone", "/v1/systemone/batch"
SERVER_MAX_QUEUE_ROWS = 100000  # the server's default 4096 is exactly one 64 x 64 batch: a request beside it is 503
# the fairness cell's big request: the most states and questions one batch request may carry, ticket-like
FAIR_POINTS = ["a refund", "a damaged delivery", "a login problem", "a billing error", "a cancellation",
               "a double charge", "a missing email", "an app crash", "a legal threat", "a competitor",
               "a deadline", "a premium account", "personal data", "a security issue", "a repeat contact",
               "a wrong address"]


def fairness_questions() -> dict:
    out = {}
    for i in range(MAX_QUESTIONS):
        point, kind = FAIR_POINTS[i % len(FAIR_POINTS)], i * 4 // MAX_QUESTIONS
        if kind == 0:
            out[f"mentions_{i}"] = {"type": "noul", "instructions": f"Does the ticket mention {point}?"}
        elif kind == 1:
            out[f"act_today_{i}"] = {"type": "noul", "instructions": f"Must an agent act on {point} today?",
                                     "labels": {"false": "can wait", "true": "today"}}
        elif kind == 2:
            out[f"weight_{i}"] = {"type": "score", "instructions": f"How central is {point} to the ticket?",
                                  "criteria": ["absent", "mentioned", "central"]}
        else:
            out[f"owner_{i}"] = {"type": "choice", "instructions": f"Which team should handle {point}?",
                                 "criteria": {"support": "first-line help", "billing": "money and invoices",
                                              "engineering": "bugs and outages"}}
    return out


BIG_STATES = [f"Ticket {i}: {TOPICS[i % len(TOPICS)]}. " + "The customer explains the problem at length. " * (1 + i % 4)
              + f"Order {1000 + 37 * i}, contacted us {1 + i % 5} times." for i in range(MAX_BATCH_STATES)]
BIG_ROWS = MAX_BATCH_STATES * MAX_QUESTIONS
BUNDLED = {"laya-mini": os.path.join(REPO, "laya", "laya_mini")}  # --shapes laya-mini: the shipped trained checkpoint
WEIGHT_STD = {"tiny": 0.3}  # sharp answers on the tiny test shape; the published-like 0.02 elsewhere


# ---- environment -----------------------------------------------------------------------------------

def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "fastapi", "starlette", "uvicorn", "pydantic",
                 "prometheus-client", "numpy", "tilelang"):
        out[name] = package_version(name)
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
    except ImportError:
        out["torch_cuda"] = None
    out["laya_git"] = git_revision()
    return out


def gpu_info(device: str) -> list[dict] | None:
    """Name, driver and memory of each GPU (nvidia-smi; torch when it is missing); None on a CPU run."""
    if not device.startswith("cuda"):
        return None
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout
        rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
        if rows:
            return [{"name": r[0], "driver": r[1], "memory_total": r[2]} for r in rows if len(r) == 3]
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import torch

        return [{"name": torch.cuda.get_device_name(i), "driver": None,
                 "memory_total": f"{torch.cuda.get_device_properties(i).total_memory >> 20} MiB"}
                for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - a record, not a requirement
        return None


def checkpoint_shape(path: str) -> dict:
    """The encoder's dimensions, the runtime budgets and the parameter count (from the safetensors header)."""
    with open(os.path.join(path, "encoder", "config.json"), encoding="utf-8") as f:
        enc = json.load(f)
    with open(os.path.join(path, "rl_agent_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    tensors = [v for k, v in header.items() if k != "__metadata__"]
    return {"model_type": enc.get("model_type"), "hidden_size": enc.get("hidden_size"),
            "num_hidden_layers": enc.get("num_hidden_layers"), "num_attention_heads": enc.get("num_attention_heads"),
            "intermediate_size": enc.get("intermediate_size"), "vocab_size": enc.get("vocab_size"),
            "max_len": cfg.get("max_len"), "head_max_len": cfg.get("head_max_len"), "amp_dtype": cfg.get("amp_dtype"),
            "parameters": sum(math.prod(t["shape"]) for t in tensors),
            "stored_dtypes": sorted({t["dtype"] for t in tensors})}


# ---- server process --------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(port: int, path: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return json.loads(r.read())


ENGINE_LABEL = {"auto": "", "on": "+engine", "off": "+inproc"}


def start_server(checkpoint: str, port: int, backend: str, batching: bool, args: argparse.Namespace,
                 log_path: str, ready_timeout: float, engine: str = "auto") -> subprocess.Popen:
    cmd = [sys.executable, "-m", "laya.serve", "--host", "127.0.0.1", "--port", str(port),
           "--threads", str(args.server_threads), "--backend", backend,
           "--model", f"bench={checkpoint}", "--default-model", "bench", "--models", "bench", "--device", args.device,
           "--max-concurrent", str(args.server_max_concurrent), "--max-queue-rows", str(SERVER_MAX_QUEUE_ROWS),
           "--log-level", "warning",
           "--batch-window-ms", str(args.window_ms), "--engine-process", engine]
    if args.max_batch_rows:
        cmd += ["--max-batch-rows", str(args.max_batch_rows)]
    if args.max_batch_tokens:
        cmd += ["--max-batch-tokens", str(args.max_batch_tokens)]
    if not batching:
        cmd.append("--no-batching")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    if args.cold:  # an empty kernel store of its own, next to the server's log
        env["LAYA_KERNEL_CACHE"] = tempfile.mkdtemp(prefix="kernels-", dir=os.path.dirname(log_path))
    log = open(log_path, "ab")  # a file, not a pipe: a chatty server never blocks on a full pipe
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.time() + ready_timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): {tail(log_path)}")
        try:
            if get_json(port, "/health", 2).get("loaded"):
                return proc
        except OSError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise TimeoutError(f"the server did not become ready within {ready_timeout:.0f} s: {tail(log_path)}")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def tail(path: str, chars: int = 1500) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()[-chars:]
    except OSError:
        return ""


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for name in ("laya_batch_items_sum", "laya_batch_items_count"):
        m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) a process has used so far (/proc; None where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def cpu_split(before: tuple, after: tuple) -> dict | None:
    """Shares of the machine's CPU capacity over a cell (warm-up included): the server, this generator, every
    other process (a shared box), steal."""
    (m0, s0), (m1, s1) = before, after
    if None in (m0, m1, s0, s1):
        return None
    d = {k: m1[k] - m0[k] for k in m0}
    total = d["busy"] + d["idle"] + d["steal"]
    if total <= 0:
        return None
    server, own = s1 - s0, d["own"]
    return {"server_pct": round(100 * server / total, 1), "generator_pct": round(100 * own / total, 1),
            "others_pct": round(100 * max(0.0, d["busy"] - server - own) / total, 1),
            "steal_pct": round(100 * d["steal"] / total, 1)}


# ---- load generator --------------------------------------------------------------------------------

class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and the body."""

    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None
        self.timing: str | None = None  # the last answer's Server-Timing value

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
        length, close, self.timing = 0, False, None
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            key = key.lower()
            if key == "content-length":
                length = int(value)
            elif key == "server-timing":
                self.timing = value  # parsed after the cell: the generator shares the cores with the server
            elif key == "connection" and "close" in value.lower():
                close = True
        await self.reader.readexactly(length)
        if close:
            await self.close()
        return int(status_line.split()[1])

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


BODIES = [json.dumps({"state": s, "questions": QUESTIONS, "model": "bench"}).encode() for s in STATES]
SMALL_BODIES = [json.dumps({"state": s, "questions": {"urgent": QUESTIONS["urgent"]}, "model": "bench"}).encode()
                for s in STATES]
BIG_BODIES = [json.dumps({"states": BIG_STATES, "questions": fairness_questions(), "model": "bench"}).encode()]


async def send(conn: Connection, i: int, bodies: list[bytes] = BODIES, path: str = SINGLE) -> int:
    try:
        return await conn.post(path, bodies[i % len(bodies)])
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        await conn.close()
        return 0


async def warm_up(conns: list[Connection], requests: int, seconds: float, bodies: list[bytes] = BODIES) -> None:
    """Closed-loop requests before timing (graph captures, allocator growth); fresh connections afterwards."""
    budget, deadline = [requests], time.perf_counter() + seconds

    async def client(k: int) -> None:
        i = k
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            await send(conns[k], i, bodies)
            i += len(conns)

    await asyncio.gather(*(client(k) for k in range(len(conns))))
    for c in conns:  # idle ones may have hit the keep-alive timeout
        await c.close()


STAGES = ("http", "queue", "prep", "forward", "decode", "wakeup")  # the server's Server-Timing stages, in order
TIMING = re.compile(r"(\w+);dur=([0-9.]+)")


def stage_breakdown(latencies: list[float], timings: list[str | None]) -> dict:
    """p50/p99/mean (ms) of each server stage over the answered requests, plus `outside`: the client's latency
    less the server's own total (loopback, uvicorn's parsing before the route, the generator's lag). `tail` is
    where the slowest 1% went: each stage's mean over the requests at or past the p99 latency."""
    names = (*STAGES, "total", "outside")
    rows = []  # (latency ms, {stage: ms}) of each answered request with a Server-Timing header
    for latency, header in zip(latencies, timings):
        if header:
            t = {k: float(v) for k, v in TIMING.findall(header)}
            if "total" in t:
                t["outside"] = max(0.0, latency * 1000.0 - t["total"])
            rows.append((latency * 1000.0, t))
    if not rows:
        return {}

    def stats(values: list[float]) -> dict:
        v = sorted(values)
        return {"p50": round(v[int(0.50 * len(v))], 3), "p99": round(v[min(len(v) - 1, int(0.99 * len(v)))], 3),
                "mean": round(statistics.mean(v), 3)}

    out = {name: stats([t[name] for _, t in rows if name in t]) for name in names if any(name in t for _, t in rows)}
    cut = sorted(ms for ms, _ in rows)[min(len(rows) - 1, int(0.99 * len(rows)))]
    tail = [t for ms, t in rows if ms >= cut]
    out["tail"] = {"requests": len(tail), "latency_ms_from": round(cut, 3),
                   **{name: round(statistics.mean(t.get(name, 0.0) for t in tail), 3) for name in names}}
    return out


def summary(latencies: list[float], sent: int, errors: int, wall: float, timings: list | None = None,
            decisions: int = DECISIONS_PER_REQUEST) -> dict:
    stages = stage_breakdown(latencies, timings) if timings else {}
    lat = sorted(latencies)

    def pct(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else None

    return {"requests": sent, "ok": len(lat), "errors": errors, "seconds": round(wall, 3),
            "requests_per_s": round(len(lat) / wall, 1) if wall > 0 else 0.0,
            "decisions_per_s": round(decisions * len(lat) / wall, 1) if wall > 0 else 0.0,
            "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": round(lat[-1] * 1000, 2) if lat else None,
            "mean_ms": round(statistics.mean(lat) * 1000, 2) if lat else None, "stages_ms": stages}


async def closed_loop(port: int, clients: int, max_requests: int, max_seconds: float, warmup: int,
                      warmup_seconds: float) -> dict:
    conns = [Connection(port) for _ in range(clients)]
    await warm_up(conns, max(warmup, clients), warmup_seconds)
    latencies: list[float] = []
    timings: list[str | None] = []
    counts = {"sent": 0, "errors": 0}
    budget = [max_requests]
    start = time.perf_counter()
    deadline = start + max_seconds

    async def client(k: int) -> None:
        i = k
        while budget[0] > 0 and time.perf_counter() < deadline:
            budget[0] -= 1
            t0 = time.perf_counter()
            status = await send(conns[k], i)
            counts["sent"] += 1
            if status == 200:
                latencies.append(time.perf_counter() - t0)
                timings.append(conns[k].timing)
            else:
                counts["errors"] += 1
            i += clients

    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - start
    for c in conns:
        await c.close()
    return {"mode": "closed", "clients": clients,
            **summary(latencies, counts["sent"], counts["errors"], wall, timings)}


async def schedule(conns: list[Connection], rate_rps: float, seconds: float, bodies: list[bytes]) -> tuple:
    """Requests on a fixed schedule (request j at start + j / rate, sent by client j mod C); each latency counts
    from the scheduled start, so falling behind shows in p99. Requests still unsent 1.5 x seconds after the start
    count as not sent. Returns (latencies, timings, counts, start, total)."""
    clients = len(conns)
    total = max(1, int(rate_rps * seconds))
    latencies: list[float] = []
    timings: list[str | None] = []
    counts = {"sent": 0, "errors": 0, "ends": [], "statuses": {}}
    start = time.perf_counter() + 0.05
    give_up = start + 1.5 * seconds

    async def client(k: int) -> None:
        for j in range(k, total, clients):
            scheduled = start + j / rate_rps
            now = time.perf_counter()
            if now > give_up:
                return
            if scheduled > now:
                await asyncio.sleep(scheduled - now)
            status = await send(conns[k], j, bodies)
            end = time.perf_counter()
            counts["sent"] += 1
            counts["ends"].append(end)
            if status == 200:
                latencies.append(end - scheduled)
                timings.append(conns[k].timing)
            else:
                counts["errors"] += 1
                counts["statuses"][str(status)] = counts["statuses"].get(str(status), 0) + 1

    await asyncio.gather(*(client(k) for k in range(clients)))
    return latencies, timings, counts, start, total


async def paced(port: int, clients: int, rate_dps: float, seconds: float, warmup: int, warmup_seconds: float) -> dict:
    """The paced cell: throughput is answered requests over the schedule's span."""
    conns = [Connection(port) for _ in range(clients)]
    if warmup:  # warmup=0: a cold cell, timed from the first request the server ever answers
        await warm_up(conns, max(warmup, clients), warmup_seconds)
    rate_rps = rate_dps / DECISIONS_PER_REQUEST
    latencies, timings, counts, start, total = await schedule(conns, rate_rps, seconds, BODIES)
    span = total / rate_rps  # the schedule's length: a server that keeps up answers `total` within it
    for c in conns:
        await c.close()
    cell = {"mode": "rate", "clients": clients, **summary(latencies, counts["sent"], counts["errors"], span, timings)}
    cell.update(offered_decisions_per_s=rate_dps, scheduled=total, not_sent=total - counts["sent"],
                last_answer_s=round(max(counts["ends"], default=start) - start, 3))
    return cell


async def fairness(port: int, clients: int, rate_rps: float, seconds: float, warmup: int, warmup_seconds: float,
                   goal_p99_ms: float) -> dict:
    """Paced 1-question requests while one client keeps a 64 x 64 batch request in flight, back to back."""
    big = Connection(port)
    conns = [Connection(port) for _ in range(clients)]
    if warmup:  # the batch's pass shapes (graph captures, allocator growth) are not timed either
        try:  # its first passes are the point; a slow box need not wait for all 4,096 rows
            await asyncio.wait_for(send(big, 0, BIG_BODIES, BATCH), warmup_seconds)
        except asyncio.TimeoutError:
            pass
        await big.close()
        await warm_up(conns, max(warmup, clients), warmup_seconds, SMALL_BODIES)
    batches: list[tuple] = []  # (sent, answered, status, Server-Timing) of each big request
    flight = {"since": None, "running": True}

    async def background() -> None:
        while flight["running"]:
            flight["since"] = t0 = time.perf_counter()
            status = await send(big, 0, BIG_BODIES, BATCH)
            flight["since"] = None
            batches.append((t0, time.perf_counter(), status, big.timing))

    task = asyncio.create_task(background())
    await asyncio.sleep(0.2)  # the batch is queued before the first 1-question request is due
    latencies, timings, counts, start, total = await schedule(conns, rate_rps, seconds, SMALL_BODIES)
    span = total / rate_rps
    flight["running"] = False
    longest = max((e - s for s, e, _, _ in batches), default=seconds)
    try:  # the batch in flight is let finish, within reason
        await asyncio.wait_for(task, 5.0 + 2 * longest)
        unfinished = None
    except asyncio.TimeoutError:
        unfinished = flight["since"]
    for c in (big, *conns):
        await c.close()
    window_end = start + span
    intervals = [(s, e) for s, e, _, _ in batches] + ([(unfinished, time.perf_counter())] if unfinished else [])
    busy = sum(max(0.0, min(e, window_end) - max(s, start)) for s, e in intervals)
    ok = [b for b in batches if b[2] == 200]
    lat = sorted(e - s for s, e, _, _ in ok)
    errors = len(batches) - len(ok)
    batch = {"states": MAX_BATCH_STATES, "questions": MAX_QUESTIONS, "rows": BIG_ROWS, "route": BATCH,
             "sent": len(intervals), "completed": len(ok), "errors": errors, "unfinished": int(bool(unfinished)),
             "error_statuses": sorted({str(b[2]) for b in batches if b[2] != 200}),
             "p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
             "min_ms": round(lat[0] * 1000, 1) if lat else None, "max_ms": round(lat[-1] * 1000, 1) if lat else None,
             "latencies_ms": [round((e - s) * 1000, 1) for s, e, st, _ in ok][:200],
             "rows_per_s": round(BIG_ROWS * len(ok) / (ok[-1][1] - ok[0][0]), 1) if ok else None,
             "busy_pct": round(100 * busy / span, 1) if span > 0 else None,
             "stages_ms": stage_breakdown([e - s for s, e, _, _ in ok], [b[3] for b in ok])}
    cell = {"mode": "fairness", "clients": clients,
            **summary(latencies, counts["sent"], counts["errors"], span, timings, decisions=1)}
    cell.update(questions_per_request=1, offered_requests_per_s=rate_rps, scheduled=total,
                not_sent=total - counts["sent"], error_statuses=counts["statuses"],
                last_answer_s=round(max(counts["ends"], default=start) - start, 3), batch=batch,
                server_max_queue_rows=SERVER_MAX_QUEUE_ROWS, goal_p99_ms=goal_p99_ms)
    # met only if the batch really ran beside them and nothing failed on either side
    cell["met"] = bool(cell["p99_ms"] is not None and cell["p99_ms"] <= goal_p99_ms and not cell["errors"]
                       and not cell["not_sent"] and not errors and busy > 0)
    return cell


# ---- driver ----------------------------------------------------------------------------------------

class Run:
    """Everything measured so far, written out after every cell."""

    def __init__(self, args: argparse.Namespace, out: str):
        self.args, self.out = args, out
        self.started = dt.datetime.now(dt.timezone.utc)
        self.t0 = time.monotonic()
        self.servers: list[dict] = []
        self.cells: list[dict] = []
        self.skipped: list[str] = []
        self.result = {
            "benchmark": "bench_serve", "date": self.started.isoformat(timespec="seconds"), "finished": None,
            "machine": {"gpus": gpu_info(args.device), "cpu": cpu_model(), "cores": os.cpu_count(),
                        "usable_cores": usable_cores(), "platform": platform.platform()},
            "versions": versions(), "device": args.device, "shapes": {},
            "settings": {k: v for k, v in vars(args).items() if k not in ("out", "checkpoint_dir", "log_dir")},
            "goal": {"decisions_per_s": args.goal_dps, "p99_ms": args.goal_p99_ms, "clients": args.goal_clients,
                     "fairness_p99_ms": args.fairness_goal_p99_ms if args.fairness else None},
        }
        self.result["settings"].update(questions_per_request=DECISIONS_PER_REQUEST,
                                       server="uvicorn, one process, one inference worker",
                                       server_max_queue_rows=SERVER_MAX_QUEUE_ROWS,
                                       client="asyncio HTTP/1.1 keep-alive, one connection per client")

    def remaining(self) -> float:
        if not self.args.time_budget_s:
            return float("inf")
        return self.args.time_budget_s - (time.monotonic() - self.t0)

    def verdicts(self) -> list[dict]:
        out = []
        keys = dict.fromkeys((c["shape"], c["backend"]) for c in self.cells)
        for shape, backend in keys:
            mine = [c for c in self.cells if c["shape"] == shape and c["backend"] == backend and c["batching"]
                    and c["clients"] == self.args.goal_clients and c["mode"] != "fairness"]
            for cell in mine:
                met = (cell["decisions_per_s"] >= self.args.goal_dps and cell["p99_ms"] is not None
                       and cell["p99_ms"] <= self.args.goal_p99_ms and not cell["errors"]
                       and not cell.get("not_sent"))
                out.append({"shape": shape, "backend": backend, "mode": cell["mode"],
                            "decisions_per_s": cell["decisions_per_s"], "p99_ms": cell["p99_ms"], "met": met})
            for cell in self.cells:
                if (cell["shape"], cell["backend"], cell["mode"]) == (shape, backend, "fairness"):
                    out.append({"shape": shape, "backend": backend, "mode": "fairness", "p99_ms": cell["p99_ms"],
                                "goal_p99_ms": cell["goal_p99_ms"], "batches": cell["batch"]["completed"],
                                "met": cell["met"]})
        return out

    def save(self) -> None:
        speedups = {}
        for c in self.cells:
            if c["mode"] != "closed" or not c["batching"]:
                continue
            off = next((o for o in self.cells if o["mode"] == "closed" and not o["batching"] and
                        (o["shape"], o["backend"], o["clients"]) == (c["shape"], c["backend"], c["clients"])), None)
            if off and off["requests_per_s"]:
                speedups[f"{c['shape']}/{c['backend']}/{c['clients']}"] = round(
                    c["requests_per_s"] / off["requests_per_s"], 2)
        self.result.update(servers=self.servers, cells=self.cells, skipped=self.skipped,
                           batching_speedup_requests_per_s=speedups, goal_verdicts=self.verdicts(),
                           finished=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
        os.makedirs(os.path.dirname(os.path.abspath(self.out)), exist_ok=True)
        tmp = f"{self.out}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.result, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.out)

    def table(self) -> str:
        lines = [f"{'shape':6s} {'backend':8s} {'batch':5s} {'mode':8s} {'clients':>7s} {'dec/s':>9s} {'req/s':>8s} "
                 f"{'p50 ms':>8s} {'p99 ms':>8s} {'err':>4s} {'st/fwd':>6s}"]
        for c in self.cells:
            lines.append(f"{c['shape']:6s} {c['backend']:8s} {'on' if c['batching'] else 'off':5s} {c['mode']:8s} "
                         f"{c['clients']:7d} {c['decisions_per_s']:9.1f} {c['requests_per_s']:8.1f} "
                         f"{c['p50_ms'] if c['p50_ms'] is not None else '-':>8} "
                         f"{c['p99_ms'] if c['p99_ms'] is not None else '-':>8} {c['errors']:4d} "
                         f"{c['mean_states_per_forward'] if c['mean_states_per_forward'] is not None else '-':>6}")
        goal = (f"goal: >= {self.args.goal_dps:g} decisions/s at p99 <= {self.args.goal_p99_ms:g} ms with "
                f"{self.args.goal_clients} clients (judged on the paced 'rate' cell; a closed loop of C clients "
                "waits C / req/s on average)")
        lines.append(goal)
        verdicts = self.verdicts()
        for v in verdicts:
            if v["mode"] == "fairness":
                lines.append(f"  {v['shape']}/{v['backend']} fairness: 1-question p99 {v['p99_ms']} ms beside "
                             f"{v['batches']} 64x64 batches (goal <= {v['goal_p99_ms']:g} ms) -> "
                             f"{'MET' if v['met'] else 'not met'}")
                continue
            lines.append(f"  {v['shape']}/{v['backend']} {v['mode']:6s}: {v['decisions_per_s']:.1f} dec/s, "
                         f"p99 {v['p99_ms']} ms -> {'MET' if v['met'] else 'not met'}")
        if not any(v["mode"] != "fairness" for v in verdicts):
            lines.append(f"  no batching-on cell with {self.args.goal_clients} clients was measured")
        for s in self.skipped:
            lines.append(f"  skipped: {s}")
        return "\n".join(lines)


def run_server(run: Run, shape: str, checkpoint: str, backend: str, batching: bool, log_dir: str,
               engine: str = "auto") -> None:
    args = run.args
    cell_need = args.max_seconds + 10
    if run.remaining() < cell_need + 15:
        run.skipped.append(f"{shape}/{backend}/batching {'on' if batching else 'off'}: out of time budget")
        return
    port = free_port()
    log_path = os.path.join(log_dir, f"server_{shape}_{backend}_{'on' if batching else 'off'}_{engine}.log")
    started = time.monotonic()
    try:
        proc = start_server(checkpoint, port, backend, batching, args, log_path,
                            min(args.ready_timeout, run.remaining() - cell_need), engine)
    except (RuntimeError, TimeoutError) as e:
        run.skipped.append(f"{shape}/{backend}/batching {'on' if batching else 'off'}: {e}")
        print(f"{shape} {backend}: {e}", flush=True)
        run.save()
        return
    try:
        health = get_json(port, "/health")
        run.servers.append({"shape": shape, "backend_asked": backend, "batching": batching, "engine_process": engine,
                            "ready_s": round(time.monotonic() - started, 1), "device": health.get("device"),
                            "backends": health.get("backends"), "cpu_fallbacks": health.get("cpu_fallbacks"),
                            "batching_settings": health.get("batching"), "log": os.path.basename(log_path)})
        installed = (health.get("backends") or {}).get("bench") or backend
        installed += ENGINE_LABEL[engine]  # cells of one backend with and without the engine process stay apart
        # the paced cell (the goal's) first: a run cut short by its time budget still has it
        plan = [("rate", args.rate_clients, rate) for rate in args.rate_dps] if batching else []
        plan += [("fairness", args.fairness_clients, None)] if batching and args.fairness else []
        plan += [("closed", c, None) for c in args.clients]
        cold_done = False
        for mode, clients, rate in plan:
            need = args.fairness_seconds + 30 if mode == "fairness" else cell_need
            if run.remaining() < need:
                run.skipped.append(f"{shape}/{installed}/batching {'on' if batching else 'off'}/{mode} {clients} "
                                   "clients: out of time budget")
                continue
            warm_s = max(5.0, min(30.0, run.remaining() - cell_need))
            before = scrape(port)
            cpu_before = (cpu_sample(), process_cpu(proc.pid))
            if mode == "closed":
                cell = asyncio.run(closed_loop(port, clients, args.max_requests, args.max_seconds, args.warmup, warm_s))
            elif mode == "fairness":
                cell = asyncio.run(fairness(port, clients, args.fairness_rate, args.fairness_seconds, args.warmup,
                                            warm_s, args.fairness_goal_p99_ms))
            else:
                warmup = 0 if args.cold and not cold_done else args.warmup
                cold_done = True
                cell = asyncio.run(paced(port, clients, rate, args.max_seconds, warmup, warm_s))
                cell["cold"] = warmup == 0
            cpu = cpu_split(cpu_before, (cpu_sample(), process_cpu(proc.pid)))
            after = scrape(port)
            forwards = after["laya_batch_items_count"] - before["laya_batch_items_count"]
            items = after["laya_batch_items_sum"] - before["laya_batch_items_sum"]
            cell.update(shape=shape, backend=installed, batching=batching, engine_process=engine,
                        mean_states_per_forward=round(items / forwards, 2) if forwards else None,
                        loadavg_1m=round(os.getloadavg()[0], 2), cpu_share=cpu)
            run.cells.append(cell)
            run.save()
            if mode == "fairness":
                b = cell["batch"]
                verdict = "MET" if cell["met"] else "not met"
                print(f"{shape:5s} {installed:8s} batching=on  fairness 1q at {args.fairness_rate:g}/s: "
                      f"{cell['ok']} ok, p50 {cell['p50_ms']} ms  p99 {cell['p99_ms']} ms  max {cell['max_ms']} ms  "
                      f"errors {cell['errors']} (goal p99 <= {cell['goal_p99_ms']:g} ms: {verdict})"
                      f"; 64x64 batches {b['completed']} done ({b['unfinished']} cut off), p50 {b['p50_ms']} ms, "
                      f"max {b['max_ms']} ms, in flight {b['busy_pct']}% of the window, errors {b['errors']}",
                      flush=True)
            else:
                print(f"{shape:5s} {installed:8s} batching={'on ' if batching else 'off'} {mode:6s} "
                      f"clients={clients:4d} {cell['decisions_per_s']:9.1f} dec/s  p50 {cell['p50_ms']} ms  "
                      f"p99 {cell['p99_ms']} ms  errors {cell['errors']}  states/forward "
                      f"{cell['mean_states_per_forward']}", flush=True)
            if cell["stages_ms"]:
                stages = {k: v for k, v in cell["stages_ms"].items() if k != "tail"}
                tail = cell["stages_ms"]["tail"]
                print("      p50/p99 ms by stage: "
                      + "  ".join(f"{k} {v['p50']}/{v['p99']}" for k, v in stages.items()), flush=True)
                print(f"      slowest 1% ({tail['requests']} from {tail['latency_ms_from']} ms), mean ms: "
                      + "  ".join(f"{k} {tail[k]}" for k in (*STAGES, "outside")), flush=True)
    finally:
        stop_server(proc)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="tiny", help="scripts/make_checkpoint.py shapes (random weights), or "
                   "laya-mini (the bundled trained checkpoint)")
    p.add_argument("--backends", default="eager", help="server --backend values, in order (eager, compile, "
                   "tilelang, auto)")
    p.add_argument("--batching", default="off,on", help="off, on or off,on")
    p.add_argument("--engine-process", default="auto", help="server --engine-process values, in order (auto, on, "
                   "off; e.g. off,on for an A/B of the forward in a child process)")
    p.add_argument("--clients", default="1,8,32,128", help="closed-loop client counts")
    p.add_argument("--rate-dps", default="", help="paced cells: decisions/s offered, comma-separated (none: no paced cell)")
    p.add_argument("--cold", action="store_true",
                   help="each server starts on an empty kernel store (LAYA_KERNEL_CACHE) and its first paced cell "
                   "sends no warm-up: the first seconds of a freshly started replica")
    p.add_argument("--rate-clients", type=int, default=128)
    p.add_argument("--goal-dps", type=float, default=1000.0)
    p.add_argument("--goal-p99-ms", type=float, default=50.0)
    p.add_argument("--goal-clients", type=int, default=128)
    p.add_argument("--fairness", action="store_true", help="a fairness cell per batching-on server: paced "
                   "1-question requests while a 64-state x 64-question batch request is kept in flight")
    p.add_argument("--fairness-seconds", type=float, default=12.0, help="the fairness cell's schedule (after warm-up)")
    p.add_argument("--fairness-rate", type=float, default=20.0, help="1-question requests/s in the fairness cell")
    p.add_argument("--fairness-clients", type=int, default=32, help="connections the 1-question requests go over "
                   "(enough that one slow answer does not hold the next scheduled send)")
    p.add_argument("--fairness-goal-p99-ms", type=float, default=None,
                   help="the 1-question p99 goal (default 100 ms on cuda, 2000 ms on cpu)")
    p.add_argument("--max-requests", type=int, default=3000, help="per closed-loop cell (after warm-up)")
    p.add_argument("--max-seconds", type=float, default=12.0, help="per cell (after warm-up)")
    p.add_argument("--warmup", type=int, default=20, help="requests per cell before timing (at least one per client)")
    p.add_argument("--window-ms", type=float, default=2.0, help="batching window when batching is on")
    p.add_argument("--max-batch-rows", type=int, default=None, help="server --max-batch-rows (default: its own)")
    p.add_argument("--max-batch-tokens", type=int, default=None, help="server --max-batch-tokens (rows x max_len, "
                   "512 assumed, per pass; default: its own)")
    p.add_argument("--server-max-concurrent", type=int, default=0,
                   help="server --max-concurrent (default 0: twice the largest client count, so no cell sees a 503; "
                   "the server's own default is 16)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--server-threads", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                   help="torch intra-op threads in the server (default: half the cores; the generator needs the rest)")
    p.add_argument("--ready-timeout", type=float, default=120.0, help="seconds for a server to load (and compile)")
    p.add_argument("--time-budget-s", type=float, default=0.0, help="bound on the whole run (0 = none)")
    p.add_argument("--checkpoint-dir", default=None, help="where to build/reuse the checkpoints (default: temp)")
    p.add_argument("--log-dir", default=None, help="server logs (default: temp)")
    p.add_argument("--out", default=None, help="JSON path (default benchmarks/results/serve_<device>_<date>.json)")
    args = p.parse_args()
    # a SIGTERM (e.g. from `timeout`) unwinds through the finally blocks: no server is left behind, JSON is written
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    args.batching = [{"off": False, "on": True}[b.strip()] for b in args.batching.split(",") if b.strip()]
    args.rate_dps = [float(r) for r in args.rate_dps.split(",") if r.strip() and float(r) > 0]
    if args.fairness_goal_p99_ms is None:
        args.fairness_goal_p99_ms = 100.0 if args.device.startswith("cuda") else 2000.0
    if args.server_max_concurrent <= 0:  # each client has at most one request in flight
        args.server_max_concurrent = 2 * max([*args.clients, args.rate_clients if args.rate_dps else 0,
                                              args.fairness_clients + 1 if args.fairness else 0, 8])
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    engines = [e.strip() for e in args.engine_process.split(",") if e.strip()]
    started = dt.datetime.now(dt.timezone.utc)
    out = args.out or os.path.join(HERE, "results", f"serve_{args.device.split(':')[0]}_{started:%Y-%m-%d}.json")

    from make_checkpoint import make_checkpoint

    run = Run(args, out)
    try:
        with tempfile.TemporaryDirectory(prefix="laya-bench-serve-") as tmp:
            root = args.checkpoint_dir or tmp
            log_dir = args.log_dir or tmp
            os.makedirs(log_dir, exist_ok=True)
            for shape in shapes:
                path = BUNDLED.get(shape) or os.path.join(root, shape)
                if not os.path.isfile(os.path.join(path, "model.safetensors")):
                    began = time.monotonic()
                    make_checkpoint(path, shape, "wordpiece", seed=7, std=WEIGHT_STD.get(shape, 0.02))
                    print(f"built the {shape} checkpoint in {time.monotonic() - began:.1f} s", flush=True)
                run.result["shapes"][shape] = checkpoint_shape(path)
                for backend in backends:
                    for batching in args.batching:
                        for engine in engines:
                            run_server(run, shape, path, backend, batching, log_dir, engine)
    finally:
        run.save()
        print(f"wrote {out}")
        print(run.table(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
