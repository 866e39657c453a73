"""Two source trees, one request loop: end-to-end `predict` p50 of tree A against tree B, in one run.

    HF_HUB_OFFLINE=1 python benchmarks/bench_tree_ab.py --a OLD_TREE --b . [--model DIR] [--device cpu]
        [--backend eager] [--questions 3] [--calls 300] [--rounds 3] [--out PATH]

Each round starts one fresh interpreter per tree (PYTHONPATH = that tree, so it imports that tree's laya),
alternating A, B, A, B, ...; each process loads the checkpoint (default: the bundled laya-mini), warms up,
then times `agent.predict(ticket, questions)` over a pool of 32 distinct tickets in turn (1 state x the
first N triage questions). The verdict is the ratio of the medians of the per-process p50s (B / A).
JSON: benchmarks/results/tree_ab_<device>_<date>.json (hardware, versions, trees, per-process figures).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _env import save_result  # noqa: E402

WORKER = r"""
import json, os, statistics, sys, time
import torch
import laya
model, device, backend, n_q, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(int(os.environ.get("AB_THREADS", "2")))
agent = laya.load(model, device=device, backend=None if backend == "default" else backend)
preset = laya.triage_questions()
questions = {k: preset[k] for k in list(preset)[:n_q]}
topics = ["refund", "login", "invoice", "crash", "delivery", "password", "upgrade", "cancel"]
tickets = [f"Ticket {i}: my {topics[i % 8]} problem started {i} days ago and the app keeps failing, "
           f"please help me with order #{1000 + i} as soon as you can." for i in range(32)]
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
for i in range(30):
    agent.predict(tickets[i % 32], questions)
times = []
for i in range(calls):
    sync(); t = time.perf_counter()
    agent.predict(tickets[i % 32], questions)
    sync(); times.append((time.perf_counter() - t) * 1e3)
times.sort()
print(json.dumps({"laya": os.path.dirname(laya.__file__), "p50_ms": statistics.median(times),
                  "p90_ms": times[int(0.9 * len(times))], "calls": calls, "backend": agent.backend}))
"""


def run_tree(tree: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", WORKER, args.model, args.device, args.backend, str(args.questions),
                          str(args.calls)], env=env, capture_output=True, text=True, cwd=os.path.abspath(tree))
    if out.returncode != 0:
        raise RuntimeError(f"tree {tree}: worker failed\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="baseline tree (a checkout's root)")
    parser.add_argument("--b", default=".", help="candidate tree (default: this checkout)")
    parser.add_argument("--model", default=None, help="checkpoint (default: the bundled laya-mini)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="default", help="backend name, or 'default' (the agent's own)")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.model is None:
        args.model = os.path.join(os.path.dirname(HERE), "laya", "laya_mini")
    runs: dict[str, list] = {"a": [], "b": []}
    for r in range(args.rounds):
        for name in ("a", "b"):
            runs[name].append(run_tree(getattr(args, name), args))
            print(f"round {r + 1} {name}: p50 {runs[name][-1]['p50_ms']:.3f} ms", flush=True)
    p50 = {k: statistics.median(x["p50_ms"] for x in v) for k, v in runs.items()}
    ratio = p50["b"] / p50["a"]
    record = {"benchmark": "bench_tree_ab", "date": dt.date.today().isoformat(), "device": args.device,
              "backend": args.backend, "model": args.model, "questions": args.questions, "calls": args.calls,
              "rounds": args.rounds, "trees": {"a": os.path.abspath(args.a), "b": os.path.abspath(args.b)},
              "laya_env": {k: v for k, v in os.environ.items() if k.startswith("LAYA_")},  # e.g. LAYA_CPU_AMP
              "runs": runs, "p50_ms": p50, "ratio_b_over_a": ratio}
    out = save_result(record, f"tree_ab_{args.device.split(':')[0]}_{record['date']}.json", args.out)
    print(f"p50 A {p50['a']:.3f} ms, B {p50['b']:.3f} ms, B/A {ratio:.3f} -> {out}")


if __name__ == "__main__":
    main()
