"""The cost of batch_invariant=True against the default (batched) path, per backend, in one run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_batch_invariant.py [--model DIR] [--device cpu|cuda]
        [--backends eager,onnx] [--calls 100] [--batches 5] [--out PATH]

Two agents per backend on the same checkpoint (default: the bundled laya-mini), default and invariant, timed
alternately in one process: `predict` p50 at 1 state x 3 triage questions (32 distinct tickets in turn), and
`predict_batch` of 32 states x 3 questions (median seconds, states/s). Prints invariant / default per case and
writes JSON under benchmarks/results/ (hardware, versions, date, shapes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import laya  # noqa: E402
from _env import save_result  # noqa: E402

TOPICS = ["refund", "login", "invoice", "crash", "delivery", "password", "upgrade", "cancel"]


def tickets(n: int = 32) -> list[str]:
    return [f"Ticket {i}: my {TOPICS[i % 8]} problem started {i} days ago and the app keeps failing; "
            + "details " * (i % 7 * 6) + f"order #{1000 + i}." for i in range(n)]


def load(model: str, device: str, backend: str, invariant: bool, onnx_path: str | None):
    if backend == "onnx":
        return laya.load(model, backend="onnx", onnx_path=onnx_path, batch_invariant=invariant)
    return laya.load(model, device=device, backend=backend, batch_invariant=invariant)


def timed(fn, sync) -> float:
    sync()
    t = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t


def differences(agent, questions: dict) -> int:
    """Results of 64 tickets that differ (JSON text) between alone and inside one shuffled predict_batch."""
    import random

    states = tickets(64)
    alone = [json.dumps(agent.predict(s, questions)) for s in states]
    order = list(range(64))
    random.Random(5).shuffle(order)
    batched = agent.predict_batch([states[i] for i in order], questions)
    return sum(json.dumps(r) != alone[i] for r, i in zip(batched, order))


def measure(agents: dict, questions: dict, calls: int, batches: int, sync) -> dict:
    states = tickets()
    for agent in agents.values():  # warm-up (kernels, graphs, caches)
        for i in range(10):
            agent.predict(states[i], questions)
        agent.predict_batch(states, questions)
    single = {k: [] for k in agents}
    batch = {k: [] for k in agents}
    for i in range(calls):
        for k, agent in agents.items():
            single[k].append(timed(lambda: agent.predict(states[i % 32], questions), sync) * 1e3)
    for _ in range(batches):
        for k, agent in agents.items():
            batch[k].append(timed(lambda: agent.predict_batch(states, questions), sync))
    out = {k: {"predict_p50_ms": statistics.median(single[k]), "batch32_median_s": statistics.median(batch[k]),
               "batch32_states_per_s": 32 / statistics.median(batch[k]),
               "differing_results_of_64": differences(agents[k], questions)} for k in agents}
    out["ratio_invariant_over_default"] = {
        "predict_p50": out["invariant"]["predict_p50_ms"] / out["default"]["predict_p50_ms"],
        "batch32": out["invariant"]["batch32_median_s"] / out["default"]["batch32_median_s"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.join(os.path.dirname(HERE), "laya", "laya_mini"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backends", default="eager,onnx")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    preset = laya.triage_questions()
    questions = {k: preset[k] for k in list(preset)[:3]}
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    results, onnx_path = {}, None
    for backend in args.backends.split(","):
        if backend == "onnx":
            from laya.export.onnx import export_module

            onnx_path = os.path.join(tempfile.mkdtemp(), "laya.onnx")
            export_module(laya.load(args.model, device="cpu").model, onnx_path)
        agents = {"default": load(args.model, args.device, backend, False, onnx_path),
                  "invariant": load(args.model, args.device, backend, True, onnx_path)}
        results[backend] = measure(agents, questions, args.calls, args.batches, sync)
        r = results[backend]["ratio_invariant_over_default"]
        print(f"{backend}: predict p50 {results[backend]['default']['predict_p50_ms']:.2f} -> "
              f"{results[backend]['invariant']['predict_p50_ms']:.2f} ms ({r['predict_p50']:.2f}x); 32 x 3 batch "
              f"{results[backend]['default']['batch32_median_s']:.3f} -> {results[backend]['invariant']['batch32_median_s']:.3f} s "
              f"({r['batch32']:.2f}x); results differing alone vs batched: default "
              f"{results[backend]['default']['differing_results_of_64']}/64, invariant "
              f"{results[backend]['invariant']['differing_results_of_64']}/64", flush=True)
    record = {"benchmark": "bench_batch_invariant", "date": dt.date.today().isoformat(), "model": args.model,
              "device": args.device, "questions": list(questions), "calls": args.calls, "batches": args.batches,
              "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "results": results}
    out = save_result(record, f"batch_invariant_{args.device.split(':')[0]}_{record['date']}.json", args.out)
    print(f"-> {out}")


if __name__ == "__main__":
    main()
