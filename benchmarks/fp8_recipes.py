"""Which FP8 recipe keeps the answers (issue 27)?  Fake-quantised fp32 eager against fp32 eager, on
parity.py's 288 questions.

    python benchmarks/fp8_recipes.py [--model DIR] [--device cuda] [--json PATH]

The FP8 fast path's error is its quantisation, not its kernels (its GPU forward sits within ~0.01 of
fake-quantised fp32 on the tiny checkpoint), so recipes can be compared without kernels: each recipe
replaces some of the encoder's Linears by ``x -> Q(x) @ Q(W)^T + b`` in fp32, where Q rounds to e4m3
with laya.fp8's rule (``"row"``: one scale per row, a token of the activation or an output channel of the
weight; ``"block"``: one per 128-wide block of a row, one per row where the width is no multiple of 128), and
keeps the rest in fp32.  Roles: ``qkv`` (attn.Wqkv), ``o`` (attn.Wo), ``up`` (mlp.Wi, GEGLU's input),
``down`` (mlp.Wo), or their BERT counterparts (laya-mini).  Each recipe reports max |dp| against fp32 and
argmax agreement where fp32's margin exceeds 0.05 (parity.py's fp8 gate: 0.03 and all equal).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts"), os.path.dirname(os.path.abspath(__file__))]

from laya import fp8 as FP8  # noqa: E402
from parity import GOALS, compare, make_states, run_set, worst_questions  # noqa: E402

# role -> the Linears that play it, by encoder family (ModernBERT: the fast path's; BERT: laya-mini's)
ROLES = {"qkv": (("attn.Wqkv",), ("attention.self.query", "attention.self.key", "attention.self.value")),
         "o": (("attn.Wo",), ("attention.output.dense",)),
         "up": (("mlp.Wi",), ("intermediate.dense",)),
         "down": (("mlp.Wo",), ("output.dense",))}
BLOCK = 128


def recipes(n_layers: int) -> list[dict]:
    every = tuple(range(n_layers))
    all_roles = tuple(ROLES)
    out = [dict(name="fp8 everywhere (today's precision='fp8')", layers=every, roles=all_roles),
           dict(name="weights only (fp32 activations)", layers=every, roles=all_roles, act=None),
           dict(name="activations only (fp32 weights)", layers=every, roles=all_roles, weight=None),
           dict(name="block scales (1x128) on activations", layers=every, roles=all_roles, act="block"),
           dict(name="block scales on activations and weights", layers=every, roles=all_roles, act="block",
                weight="block")]
    for role in all_roles:
        out.append(dict(name=f"all but {role}", layers=every, roles=tuple(r for r in all_roles if r != role)))
    out.append(dict(name="qkv and up only", layers=every, roles=("qkv", "up")))
    for k in (2, 4):
        out.append(dict(name=f"all but the first {k} layers", layers=every[k:], roles=all_roles))
        out.append(dict(name=f"all but the last {k} layers", layers=every[:-k], roles=all_roles))
    out.append(dict(name="all but the first and last 2 layers", layers=every[2:-2], roles=all_roles))
    return out


def fake_quant(x, how: str | None):
    """x [rows, K] rounded through e4m3 by laya.fp8's rule, per row or per 128-wide block of a row."""
    if how is None:
        return x
    rows, k = x.shape
    if how == "block" and k % BLOCK == 0:
        x = x.reshape(rows * (k // BLOCK), BLOCK)
    return FP8.dequantize_rows(*FP8.quantize_rows(x)).reshape(rows, k)


def encoder_layers(encoder) -> list:
    return list(encoder.layers if hasattr(encoder, "layers") else encoder.encoder.layer)


def role_linears(encoder, layer: int, role: str) -> list:
    """The Linears of `role` in encoder layer `layer` (ModernBERT or BERT naming)."""
    paths = ROLES[role][0 if hasattr(encoder, "layers") else 1]
    return [encoder_layers(encoder)[layer].get_submodule(path) for path in paths]


class Quantised:
    """Installs a recipe's fake-quantised forward on the encoder's Linears; restores them on exit."""

    def __init__(self, encoder, recipe: dict):
        self.encoder, self.recipe, self.saved = encoder, recipe, []

    def __enter__(self):
        import torch.nn.functional as F

        act_rule, weight_rule = self.recipe.get("act", "row"), self.recipe.get("weight", "row")
        for i in self.recipe["layers"]:
            for role in self.recipe["roles"]:
                for lin in role_linears(self.encoder, i, role):
                    w = fake_quant(lin.weight.detach().float(), weight_rule)

                    def forward(x, lin=lin, w=w):
                        y = F.linear(fake_quant(x.reshape(-1, x.shape[-1]).float(), act_rule), w,
                                     None if lin.bias is None else lin.bias.float())
                        return y.reshape(*x.shape[:-1], -1).to(x.dtype)

                    self.saved.append((lin, lin.forward))
                    lin.forward = forward
        return self

    def __exit__(self, *exc):
        for lin, forward in self.saved:
            lin.forward = forward
        self.saved.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint directory (default: parity.py's large shape)")
    parser.add_argument("--std", type=float, default=0.04)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import torch

    import laya
    from _env import bench_checkpoint, environment, save_result
    from laya.device import Precision

    model = args.model or bench_checkpoint("large", std=args.std)
    states = make_states()
    agent = laya.load(model, device=args.device)
    agent.set_backend("eager")  # (the recipes patch the eager model's Linears)
    agent.precision = Precision(torch.float32, False)
    started = time.perf_counter()
    reference = run_set(agent, states)
    encoder = agent.model.encoder
    results = []
    n_layers = len(encoder_layers(encoder))
    for recipe in recipes(n_layers):
        t0 = time.perf_counter()
        with torch.no_grad(), Quantised(encoder, recipe):
            candidate = run_set(agent, states)
        stats = compare(reference, reference, candidate)
        worst = max(row["max_dp_vs_fp32"] for row in stats.values())
        flips = sum(row["fp32_untied"] - row["argmax_agree_fp32"] for row in stats.values())
        untied = sum(row["fp32_untied"] for row in stats.values())
        gemm_share = len(recipe["layers"]) * len(recipe["roles"]) / (n_layers * len(ROLES))
        results.append({**{k: (list(v) if isinstance(v, tuple) else v) for k, v in recipe.items()},
                        "max_dp_vs_fp32": round(worst, 5), "argmax_flips": flips, "fp32_untied": untied,
                        "share_of_encoder_gemms_in_fp8": round(gemm_share, 3),
                        "pass": worst <= GOALS["fp8"] and flips == 0, "stats": stats,
                        "worst_questions": worst_questions(reference, candidate, states, n=3),
                        "seconds": round(time.perf_counter() - t0, 2)})
        print(f"{recipe['name']:45s} max|dp| {worst:.4f}  flips {flips:3d}/{untied}  fp8 share {gemm_share:.2f}",
              flush=True)
    record = {"benchmark": "fp8_recipes", "issue": 27, "env": environment(), "model": model,
              "states": len(states), "questions": sum(len(r["answers"]) for r in reference),
              "gate": {"max_dp_vs_fp32": GOALS["fp8"], "argmax": "equal where fp32's margin > 0.05"},
              "block": BLOCK, "recipes": results, "seconds": round(time.perf_counter() - started, 1)}
    path = save_result(record, f"fp8_recipes_{args.device.split(':')[0]}_{time.strftime('%Y-%m-%d')}.json", args.json)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
