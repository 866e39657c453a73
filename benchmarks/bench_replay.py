"""GPU time of the fused forward's CUDA graph, per request shape, and what each kernel kind costs inside it.

    PYTHONPATH=<tree>:$PYTHONPATH python benchmarks/bench_replay.py --model DIR --tag NAME --json OUT
        [--knockout] [--shapes 1x72,1x128,...]

For each shape (rows x tokens, dense or packed as FastLaya plans it) the graph of the encoder and head
is captured once and replayed 5 x 100 times between CUDA events; the median ms per replay is the
forward's GPU time without any host cost.  A/B of a kernel change: run this script once per source
tree (the PYTHONPATH decides which laya is timed; the JSON records its path) in one device session.

``--tiles JSON`` also times the table with those entries (as bench_latency.py's ``--tiles``) on a second agent in
the same process, each shape's two graphs replayed in alternation, and prints candidate / table.

``--request-path`` times, from an idle GPU, the pieces of one 1 x 128 request's forward as FastLaya runs it (filling
the host inputs, the two host-to-device copies, the encoder graph, the decision-step graph, the device-to-host copy,
each followed by a synchronize) against the whole call: where the forward's wall time goes beyond its GPU time.

``--knockout`` measures, at the 1 x 128 plan, the in-graph cost of each kernel kind: the graph is
captured again with that kind's launches skipped, and the difference to the full graph is its cost
(outputs are garbage then; only the timing counts).  Profiler durations cannot give this: kernels
launched early under programmatic dependent launch count their wait as run time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _env import environment, tile_entries  # noqa: E402

SHAPES = "1x72,1x128,1x256,10x135,3x501"
# kernel-set entries per kind (laya.fast.FastLaya.sets); "head" = every decision-head launch
KINDS = {"qkv": ["qkv"], "rope": ["rope", "rope_at"], "attention": ["attn"], "attn_out": ["o"],
         "add_ln_attn": ["ln_o"], "geglu": ["up"], "mlp_down": ["down"], "add_ln_mlp": ["ln_down"],
         "head": ["h_ln", "h_qkv", "h_attn", "h_o", "h_add_ln", "h_ffn1", "h_ffn2"]}


def request(rows: int, tokens: int):
    g = torch.Generator().manual_seed(rows * 1000 + tokens)
    ids = torch.randint(1000, 3000, (rows, tokens), generator=g)
    mask = torch.ones_like(ids)
    if rows > 1:  # ragged rows: a batch plans packed when padding would cost
        for r in range(rows):
            mask[r, tokens - (r * 37) % (tokens // 2):] = 0
    return ids, mask


def replay_ms(fast, plan, slot) -> float:
    with torch.no_grad():
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=torch.cuda.graph_pool_handle()):
            fast._body(plan, slot)
    for _ in range(20):
        graph.replay()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(100):
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 100)
    return statistics.median(times)


def prepared(fast, rows: int, tokens: int):
    """The plan and slot of a rows x tokens request, filled by one real call (so its buffers hold it)."""
    ids, mask = request(rows, tokens)
    pos = torch.ones(rows, 1, dtype=torch.long)
    live = torch.ones(rows, 1, dtype=torch.bool)
    with torch.no_grad():
        fast(ids, mask, pos, live, torch.zeros(rows, dtype=torch.long))
    lens = mask.sum(1).numpy()
    plan = fast.plan(rows, tokens, lens if rows > 1 else None)
    return plan, fast._slot(plan)


def tilelang_fast(model: str, entries: dict | None = None):
    """A tilelang agent's FastLaya on the shipped table or, with `entries`, on the table with those entries in
    place of its own (every class built while the table is patched)."""
    import laya
    import laya.fast as fast_module
    from laya.fast_tiles import with_tiles

    agent = laya.load(model, device="cuda")
    shipped = fast_module.GPU_TILES
    if entries is not None:
        fast_module.GPU_TILES = with_tiles(shipped, entries)
    try:
        agent.set_backend("tilelang", strict=True)
        if entries is not None:
            agent._fast.build_all()
    finally:
        fast_module.GPU_TILES = shipped
    return agent, agent._fast


def alternating_ms(pairs: list, rounds: int = 3) -> list:
    """replay_ms of each (fast, plan, slot), taken in turn `rounds` times: medians, so drift hits each alike."""
    times = [[] for _ in pairs]
    for _ in range(rounds):
        for i, (fast, plan, slot) in enumerate(pairs):
            times[i].append(replay_ms(fast, plan, slot))
    return [statistics.median(t) for t in times]


def knockout(fast, plan, slot, full: float) -> dict:
    from laya.fast import m_class

    kernels = fast.sets[m_class(plan.tokens)]
    out = {}
    for kind, names in KINDS.items():
        keys = [k for k in kernels if k in names or (isinstance(k, tuple) and k[0] in names)]
        saved = {k: kernels[k] for k in keys}
        try:
            for k in keys:
                kernels[k] = lambda *args: None
            out[kind] = round(full - replay_ms(fast, plan, slot), 4)
        finally:
            kernels.update(saved)
    return out


def from_idle_ms(fn, reps: int = 200) -> float:
    """Median wall ms of fn() from an idle GPU (synchronised, then 2 ms of sleep), fn ending in a synchronize."""
    import time

    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        time.sleep(0.002)
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def request_path(fast, rows: int = 1, tokens: int = 128) -> dict:
    """The wall time of each piece of one request's forward (FastLaya.__call__), from idle, and of the whole."""
    import numpy as np

    ids, mask = request(rows, tokens)
    pos, live, types = torch.ones(rows, 1, dtype=torch.long), torch.ones(rows, 1, dtype=torch.bool), \
        torch.zeros(rows, dtype=torch.long)
    with torch.no_grad():
        for _ in range(fast.capture_after + 2):  # captures the plan's graphs
            fast(ids, mask, pos, live, types)
    lens = mask.sum(1).numpy().astype(np.int64)
    plan = fast.plan(rows, tokens, lens if rows > 1 else None)
    slot = fast._slot(plan)
    head = fast._head(plan, slot, 1)
    host = (ids.numpy(), lens, pos.numpy(), live.numpy(), types.numpy())
    sync = torch.cuda.synchronize

    def copies_in():
        slot.static.copy_(slot.host, non_blocking=True)
        head.static.copy_(head.host, non_blocking=True)
        sync()

    def copy_out():
        head.result.copy_(head.out, non_blocking=True)
        sync()

    with torch.no_grad():
        parts = {
            "whole_call": from_idle_ms(lambda: fast(ids, mask, pos, live, types)),
            "fill_host": from_idle_ms(lambda: fast._fill(plan, slot, head, *host)),
            "copies_in": from_idle_ms(copies_in),
            "encoder_graph": from_idle_ms(lambda: (slot.graph.replay(), sync())),
            "decision_graph": from_idle_ms(lambda: (head.graph.replay(), sync())),
            "copy_out": from_idle_ms(copy_out),
            "run_without_fill": from_idle_ms(lambda: fast._run(plan, slot, head, (plan.tokens, plan.rows, 0))),
            "sync_only": from_idle_ms(sync),
        }
    pieces = ("fill_host", "copies_in", "encoder_graph", "decision_graph", "copy_out")
    parts["sum_of_pieces"] = sum(parts[k] for k in pieces)
    # four pieces end in a synchronize where the whole call has one: three more
    parts["sum_of_pieces_less_extra_syncs"] = parts["sum_of_pieces"] - 3 * parts["sync_only"]
    return {"plan": f"{'packed' if plan.packed else 'dense'} M={plan.tokens}",
            "wall_ms_from_idle": {k: round(v, 4) for k, v in parts.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--tag", required=True, help="name of the tree being timed (recorded)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--knockout", action="store_true")
    parser.add_argument("--request-path", action="store_true", help="the 1 x 128 request's forward, piece by piece")
    parser.add_argument("--tiles", default=None, help="also time the table with these entries: a JSON object (or a "
                        "file holding one) {kind: {class index: tile}}, as bench_latency.py --tiles")
    args = parser.parse_args()
    entries = tile_entries(args.tiles) if args.tiles is not None else None

    import laya

    agent, fast = tilelang_fast(args.model)
    # (the candidate's agent is held so that its backend, and FastLaya with it, stays installed)
    candidate_agent, candidate = tilelang_fast(args.model, entries) if entries is not None else (None, None)
    report = {"benchmark": "replay", "tag": args.tag, "laya": os.path.dirname(laya.__file__),
              "gpu": torch.cuda.get_device_name(), "env": environment(), "dtype": str(fast.dtype),
              "method": "median over 5 x 100 graph replays between CUDA events, encoder + head only",
              "replay_ms": {}, "plans": {}}
    if entries is not None:
        report.update(tiles=entries, tiles_replay_ms={}, tiles_over_table={},
                      tiles_method="table and candidate graphs replayed in turn, 3 rounds, median of each")
    for shape in args.shapes.split(","):
        rows, tokens = (int(v) for v in shape.split("x"))
        plan, slot = prepared(fast, rows, tokens)
        report["plans"][shape] = f"{'packed' if plan.packed else 'dense'} M={plan.tokens}"
        if candidate is None:
            report["replay_ms"][shape] = round(replay_ms(fast, plan, slot), 4)
            print(f"{args.tag:10s} {shape:7s} {report['plans'][shape]:14s} replay {report['replay_ms'][shape]:.4f} ms",
                  flush=True)
            continue
        table_ms, tiles_ms = alternating_ms([(fast, plan, slot), (candidate, *prepared(candidate, rows, tokens))])
        report["replay_ms"][shape], report["tiles_replay_ms"][shape] = round(table_ms, 4), round(tiles_ms, 4)
        report["tiles_over_table"][shape] = round(tiles_ms / table_ms, 4)
        print(f"{args.tag:10s} {shape:7s} {report['plans'][shape]:14s} replay table {table_ms:.4f} ms, tiles "
              f"{tiles_ms:.4f} ms, tiles/table {tiles_ms / table_ms:.3f}", flush=True)
    if args.knockout:
        plan, slot = prepared(fast, 1, 128)
        full = replay_ms(fast, plan, slot)
        report["knockout_1x128"] = {"full_ms": round(full, 4), "ms_saved_without": knockout(fast, plan, slot, full)}
        print(f"{args.tag:10s} 1x128 in-graph cost per kernel kind (ms): "
              + ", ".join(f"{k} {v:.4f}" for k, v in report["knockout_1x128"]["ms_saved_without"].items()))
    if args.request_path:
        report["request_path_1x128"] = request_path(fast)
        print(f"{args.tag:10s} 1x128 request path from idle (ms): " + ", ".join(
            f"{k} {v:.4f}" for k, v in report["request_path_1x128"]["wall_ms_from_idle"].items()))
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
