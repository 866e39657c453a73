"""Answer parity of the reduced-precision CPU paths against fp32 eager: 288 questions (benchmarks/parity.py's set).

    HF_HUB_OFFLINE=1 .venv-test/bin/python benchmarks/parity_cpu.py [--model DIR] [--graph-dir DIR] [--json PATH]
        [--int8-last-layers N] [--inductor] [--only onnx_fp32,onnx_int8_per_channel]

Candidates: eager under bf16 autocast (with its cached bf16 Linear weights, laya.cpu_bf16, and with
autocast's own per-call weight cast, the path before it), the ONNX fp32 graph, and INT8 graphs with
per-channel (the export default) and per-tensor weight scales; with --int8-last-layers N also one
quantised in its last N encoder layers only. Reference: the fp32 eager Agent (the published default).
`bf16_cache_vs_per_call` says whether the two bf16 paths give bit-identical decision logits.
Per question type: max |dp| vs fp32 (every option probability; a noul question gives P(true)) and
argmax flips on rows where fp32's top-1 minus top-2 exceeds 0.05. A path passes (issue 30's rule
for letting `auto` choose it) when max |dp| <= 0.03 and no such argmax flips.

Default model: the bundled laya-mini (trained, so answers are decided; random checkpoints answer
near-uniformly and would pass anything). Graphs are exported once into --graph-dir (outside the repo).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts"), HERE]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from parity import MARGIN, PRESET_ORDER, SNIPPETS, make_states, probabilities, run_set  # noqa: E402

GOAL_DP = 0.03


class PerCallCast:
    """In place of an agent's bf16_weights: no cached copies, so autocast casts every weight per call."""

    def scope(self, device, dtype):
        return contextlib.nullcontext()


def raw_logits(agent, states) -> list:
    """decision_logits of every (state, preset) pair of run_set, as exact fp32 values."""
    from laya import presets

    n = len(SNIPPETS)
    return [agent.decision_logits(s, presets.PRESETS[preset]())
            for p, preset in enumerate(PRESET_ORDER) for s in states[p * n:(p + 1) * n]]


def logit_identity(a: list, b: list) -> dict:
    worst = max((abs(x - y) for qa, qb in zip(a, b) for za, zb in zip(qa, qb) for x, y in zip(za, zb)), default=0.0)
    return {"bit_identical": a == b, "max_abs_logit_diff": worst, "states": len(a)}


def compare(reference: list[dict], candidate: list[dict]) -> dict:
    """Per type: questions, max |dp| vs fp32, rows with a margin > MARGIN and how many of them flip."""
    import numpy as np

    stats: dict = {}
    for ref_r, cand_r in zip(reference, candidate):
        for qid, ref_a in ref_r["answers"].items():
            r, c = np.array(probabilities(ref_a)), np.array(probabilities(cand_r["answers"][qid]))
            row = stats.setdefault(ref_a["type"], {"questions": 0, "max_dp": 0.0, "decided": 0, "flips": 0})
            row["questions"] += 1
            row["max_dp"] = max(row["max_dp"], float(np.abs(c - r).max()))
            top = np.sort(r)[::-1]
            if top[0] - top[1] > MARGIN:
                row["decided"] += 1
                row["flips"] += int(np.argmax(c) != np.argmax(r))
    return stats


EAGER = "eager_bf16"  # --only's name for the eager bf16 runs (cached copies, per-call cast)


def graphs(model: str, root: str, last_layers: int | None = None) -> dict:
    """fp32 / INT8 per-channel / INT8 per-tensor (/ INT8 last N layers) graphs of `model` in `root` (made once)."""
    import laya
    from laya.export import onnx as export

    fp32 = os.path.join(root, "laya.onnx")
    if not os.path.isfile(fp32):
        export.export_module(laya.load(model, device="cpu").model, fp32)
    out = {"onnx_fp32": fp32, "onnx_int8_per_channel": os.path.join(root, "laya.int8.onnx"),
           "onnx_int8_per_tensor": os.path.join(root, "laya.int8pt.onnx")}
    if not os.path.isfile(out["onnx_int8_per_channel"]):
        export.quantize_model(fp32, out["onnx_int8_per_channel"])
    if not os.path.isfile(out["onnx_int8_per_tensor"]):
        export.quantize_model(fp32, out["onnx_int8_per_tensor"], per_channel=False)
    if last_layers:
        tail = os.path.join(root, f"laya.int8last{last_layers}.onnx")
        out[f"onnx_int8_last{last_layers}"] = export.quantize_model(fp32, tail, last_layers=last_layers)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the bundled laya-mini)")
    parser.add_argument("--graph-dir", default=None, help="where the graphs are exported (default /tmp/laya-parity-cpu/<name>)")
    parser.add_argument("--json", default=None, help="default benchmarks/results/parity_cpu_<date>.json")
    parser.add_argument("--int8-last-layers", type=int, default=None, metavar="N",
                        help="also judge an INT8 graph quantised in its last N encoder layers only")
    parser.add_argument("--inductor", action="store_true",
                        help="also judge eager bf16 under compile=True (Inductor, frozen weights)")
    parser.add_argument("--only", default=None, metavar="NAMES",
                        help="comma-separated subset to judge (onnx_fp32, onnx_int8_per_channel, onnx_int8_per_tensor, "
                             f"{EAGER}: the two eager bf16 runs); unnamed ones are skipped")
    args = parser.parse_args(argv)

    import torch

    import laya
    from _env import save_result
    from laya.cpu_features import features
    from laya.device import Precision
    from laya.export.onnx import int8_settings
    from laya.onnx_agent import ONNXAgent
    from laya.registry import LAYA_MINI

    model = args.model or LAYA_MINI
    root = args.graph_dir or os.path.join("/tmp/laya-parity-cpu", os.path.basename(os.path.normpath(model)))
    if os.path.realpath(root).startswith(os.path.realpath(ROOT) + os.sep):
        parser.error(f"--graph-dir {root} is inside the repository; use /tmp")
    os.makedirs(root, exist_ok=True)
    started = time.perf_counter()
    only = args.only.split(",") if args.only else None
    known = {"onnx_fp32", "onnx_int8_per_channel", "onnx_int8_per_tensor", EAGER}
    if args.int8_last_layers:
        known.add(f"onnx_int8_last{args.int8_last_layers}")
    if only and set(only) - known:
        parser.error(f"--only names unknown candidates {sorted(set(only) - known)}; choose from {sorted(known)}")
    paths = graphs(model, root, args.int8_last_layers) if not only or set(only) - {EAGER} else {}
    if only:
        paths = {name: path for name, path in paths.items() if name in only}
    states = make_states()
    fp32 = laya.load(model, device="cpu")
    reference = run_set(fp32, states)
    candidates, identity = {}, None
    bf16_precision = Precision(torch.bfloat16, True, reason="parity_cpu")
    if not only or EAGER in only:
        bf16 = laya.load(model, device="cpu")
        bf16.precision = bf16_precision
        candidates["eager_bf16_autocast"] = run_set(bf16, states)
        per_call = laya.load(model, device="cpu")
        per_call.precision, per_call.bf16_weights = bf16_precision, PerCallCast()
        candidates["eager_bf16_per_call_cast"] = run_set(per_call, states)
        identity = logit_identity(raw_logits(bf16, states), raw_logits(per_call, states))
        identity["answers_identical"] = candidates["eager_bf16_autocast"] == candidates["eager_bf16_per_call_cast"]
        identity["cached_tensors"], identity["cached_bytes"] = len(bf16.bf16_weights), bf16.bf16_weights.nbytes
        del per_call
    if args.inductor:
        compiled = laya.load(model, device="cpu", compile=True, compile_warmup=False)
        compiled.precision = bf16_precision
        candidates["inductor_bf16"] = run_set(compiled, states)
        del compiled
    for name, path in paths.items():
        with ONNXAgent(model, onnx_path=path) as agent:
            candidates[name] = run_set(agent, states)
    report = {"benchmark": "parity_cpu", "model": model, "model_note": "laya-mini (trained)" if model == LAYA_MINI
              else "given checkpoint", "states": len(states), "questions": sum(len(r["answers"]) for r in reference),
              "goal": {"max_dp": GOAL_DP, "argmax_flips_margin_gt": MARGIN, "flips": 0},
              "cpu_features": features().as_dict(),
              "int8_settings": {n: int8_settings(p) for n, p in paths.items() if "int8" in n},
              "bf16_cache_vs_per_call": identity, "runs": {}}
    print(f"parity vs fp32 eager ({report['questions']} questions, {len(states)} states, {model})")
    print(f"{'candidate':24} {'type':7} {'n':>4} {'max|dp|':>8} {'flips':>9}")
    for name, answers in candidates.items():
        stats = compare(reference, answers)
        worst = max(row["max_dp"] for row in stats.values())
        flips = sum(row["flips"] for row in stats.values())
        passed = worst <= GOAL_DP and flips == 0
        report["runs"][name] = {"stats": stats, "max_dp": worst, "flips": flips, "pass": passed}
        for kind, row in stats.items():
            print(f"{name:24} {kind:7} {row['questions']:4d} {row['max_dp']:8.4f} {row['flips']:4d}/{row['decided']:<4d}")
        print(f"{name:24} max|dp| {worst:.4f}, flips {flips}: {'PASS' if passed else 'FAIL'}")
    print(f"bf16 cached weights vs autocast's per-call cast: {identity}")
    report["seconds"] = time.perf_counter() - started
    path = save_result(report, f"parity_cpu_{dt.date.today().isoformat()}.json", args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
