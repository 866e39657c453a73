"""How much of predict's cold-cache cost would any Python + torch request pay? (evidence for issue 2)

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cold_floor.py [--shape tiny] [--calls 300] [--sweep-mb 64]
        [--out PATH]

bench_overhead.py finds a request's time outside the forward ~3-4x larger right after a forward than in a
hot loop: the forward evicts the request path's code and data from the CPU caches. This benchmark asks
how much of that any implementation would pay. In one process, each call preceded by a sweep over a buffer
larger than the last-level cache (what a base-shape forward does to it), it times in turn:

  predict   agent.predict on the next of bench_overhead's 32 tickets, its model forward swapped for one
            that returns precomputed real outputs (so only the non-forward work is timed);
  floor     the least a Python request on torch has to do: split the text and look each word up in a
            dict, wrap one token tensor (torch.from_numpy over bytes), call the model module (the same
            swapped forward), read both outputs back with tolist, and build one small dict per question
            with rounded numbers. It answers nothing; it is a lower bound for any code in this language;
  sweep     the sweep alone followed by nothing (the clock reads and one call), the measurement's own floor.

It prints the medians and the ratio predict / floor, and writes JSON under benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]  # the working tree's laya and the benchmark helpers
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import laya  # noqa: E402
from _env import bench_checkpoint, environment  # noqa: E402
from bench_overhead import QUESTIONS, SINGLE_STATE_POOL, Requests, median_se, null_forward  # noqa: E402

_INT64 = np.dtype(np.int64)


def floor_request(model, text: str, token_bytes: bytearray, shape: tuple, vocab: dict, questions: dict) -> dict:
    """The least work any Python request on torch does (see the module docstring); answers nothing."""
    ids = [vocab.get(word, 0) for word in text.lower().split()]
    tokens = torch.from_numpy(np.ndarray(shape, _INT64, token_bytes))
    logits, act = model(tokens)
    rows, acts = logits.tolist(), act.tolist()
    return {qid: {"p": [round(v, 4) for v in row], "act": round(a[0], 4), "n": len(ids)}
            for qid, row, a in zip(questions, rows, acts)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="tiny", help="checkpoint shape (the forward never runs; default tiny)")
    parser.add_argument("--calls", type=int, default=300, help="timed calls of each kind (default 300)")
    parser.add_argument("--sweep-mb", type=int, default=64, help="the cache sweep's buffer (default 64 MB)")
    parser.add_argument("--out", default=None,
                        help="JSON path (default benchmarks/results/cold_floor_cpu_<date>.json)")
    args = parser.parse_args(argv)
    if args.calls < 10 or args.sweep_mb < 1:
        parser.error("--calls must be at least 10 and --sweep-mb at least 1")

    agent = laya.load(bench_checkpoint(args.shape), device="cpu")
    requests = Requests(agent, 1, 0, QUESTIONS)
    first = requests.batches[0].tensors()
    with torch.no_grad():
        outputs = agent.model(*first)
    token_bytes = bytearray(first[0].numpy().tobytes())
    shape = tuple(first[0].shape)
    vocab = agent.tok.get_vocab()
    texts = [r[0] for r in requests.requests]
    sweep = np.ones(args.sweep_mb * (1 << 20) // 8)
    model = agent.model

    times: dict[str, list[float]] = {"predict": [], "floor": [], "sweep": []}
    with null_forward(agent, outputs):
        for _ in range(2 * SINGLE_STATE_POOL):  # warm-up: every ticket once through each path
            requests()
            floor_request(model, texts[requests.turn], token_bytes, shape, vocab, QUESTIONS)
        for i in range(args.calls):
            text = texts[i % len(texts)]
            for kind in times:  # interleaved: drift hits the three alike
                sweep.sum()
                start = time.perf_counter()
                if kind == "predict":
                    requests()
                elif kind == "floor":
                    floor_request(model, text, token_bytes, shape, vocab, QUESTIONS)
                else:
                    len(text)
                times[kind].append((time.perf_counter() - start) * 1000.0)

    medians = {kind: statistics.median(v) for kind, v in times.items()}
    ratio = medians["predict"] / medians["floor"]
    for kind, value in medians.items():
        print(f"{kind:8s} {value:.4f} ms  (+- {median_se(times[kind]):.4f})")
    print(f"predict / floor: {ratio:.2f}x")
    result = {
        "benchmark": "cold_floor",
        "issue": 2,
        "date": dt.date.today().isoformat(),
        "device": "cpu",
        "environment": environment(),
        "config": {"shape": args.shape, "calls": args.calls, "sweep_mb": args.sweep_mb,
                   "tickets": len(texts), "questions": list(QUESTIONS)},
        "median_ms": medians,
        "se_ms": {kind: median_se(v) for kind, v in times.items()},
        "ratio_predict_over_floor": ratio,
    }
    out = args.out or os.path.join(HERE, "results", f"cold_floor_cpu_{dt.date.today().isoformat()}.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"wrote {os.path.relpath(out, os.getcwd())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
