"""Build, load and check an AOTInductor package of a laya DecisionModel (CPU or CUDA).

    python scripts/check_aoti.py --output-dir DIR [--model CKPT_DIR] [--device auto|cpu|cuda]
        [--dtype auto|fp32|bf16] [--[no-]compiled-baselines] [--amp-cpu] [--groups G] [--repeats R] [--warmup W]
        [--max-rows 8] [--max-tokens 512] [--max-markers 8]

Without --model a tiny random ModernBERT checkpoint is built in a temporary directory (no network).
Steps: export a separate eval copy with explicit weights (bf16 on CUDA, fp32 on the CPU) outside
autocast, tokens declared as 16 * Dim("tokens16"), rows 1-8 and marker slots 2-8 dynamic on their own;
`aoti_compile_and_package`; load the package in this process and in a fresh one (which reads only the
package and the saved inputs: no checkpoint, no laya, compilers blocked); compare both heads against
eager on three real tokenised requests (padding, uneven marker counts; none of them the export
example's shape); time eager / compiled / package side by side; finally install the package as the
agent's `aoti` backend and compare `predict` answers with the eager agent (`backend_parity`).
The package carries laya's record (ranges, device, dtype, weights fingerprint; laya.export.aoti), so
`laya.load(CKPT, backend="aoti", aoti_path=DIR/decision.pt2)` can serve it.

Writes decision.pt2, results.json, inputs.pt and eager.pt to --output-dir. Exit status: 0 pass or
SKIP (missing CUDA, AOTInductor API or C++ compiler for the requested device; results.json says
"skip"), 1 when packaging or parity fails on a capable machine, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Parity tolerances, package vs eager of the very same explicit-dtype copy on the same padded inputs.
# fp32: float rounding only. bf16: Inductor fuses and reorders bf16 math (the notes saw 0.0066 in
# probability between compiled and eager bf16), so probabilities get 0.05 and logits are only reported.
TOLERANCES = {"fp32": {"prob": 1e-3, "logits_atol": 1e-3, "logits_rtol": 1e-4},
              "bf16": {"prob": 5e-2, "logits_atol": None, "logits_rtol": None}}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "billing": "invoice or charge",
                            "cancel": "end the plan", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Is it urgent?", "labels": {"false": "later", "true": "now"}},
}
# Three request shapes (states x questions): 1x3, 2x3 with one long state, 1x2 with a long state and
# only 3 marker slots (rows carry 5, 3 and 2 live markers: uneven counts, masked slots).
REQUESTS = (
    (["I was charged twice for order 1234 and want a refund."], ("intent", "anger", "urgent")),
    (["The app crashes on login.", "My invoice is wrong again. " * 25], ("intent", "anger", "urgent")),
    (["Please cancel my subscription, the billing keeps failing and support never answers. " * 12],
     ("anger", "urgent")),
)


# ---- pieces shared by both processes (torch only) ---------------------------------------------------


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1)


def compare(ref: tuple, got: tuple, live: torch.Tensor, tol: dict) -> dict:
    """Max deltas of both heads (decision logits at live marker slots only) and argmax agreement."""
    (rl, ra), (gl, ga) = [(a.detach().float().cpu(), b.detach().float().cpu()) for a, b in (ref, got)]
    live = live.cpu().bool()
    d_logits = (gl - rl).abs()[live]
    report = {
        "max_abs_logit": float(d_logits.max()),
        "max_abs_act_logit": float((ga - ra).abs().max()),
        "max_abs_prob": float((softmax(gl) - softmax(rl)).abs().max()),
        "max_abs_act_prob": float((softmax(ga) - softmax(ra)).abs().max()),
        "argmax_agree": int((gl.argmax(-1) == rl.argmax(-1)).sum()),
        "act_argmax_agree": int((ga.argmax(-1) == ra.argmax(-1)).sum()),
        "rows": int(rl.shape[0]),
    }
    ok = max(report["max_abs_prob"], report["max_abs_act_prob"]) <= tol["prob"]
    if tol.get("logits_atol") is not None:
        excess = ((gl - rl).abs() - tol["logits_rtol"] * rl.abs())[live].max()
        act_excess = ((ga - ra).abs() - tol["logits_rtol"] * ra.abs()).max()
        ok = ok and float(max(excess, act_excess)) <= tol["logits_atol"]
    report["ok"] = bool(ok)
    return report


def block_compilers() -> None:
    """Make any compile attempt in this process fail loudly: loading a package must not compile a model."""
    import torch._inductor

    def refuse(*_a, **_k):
        raise RuntimeError("a compiler entry point was called while loading an AOTInductor package")

    torch.compile = refuse
    torch._inductor.aoti_compile_and_package = refuse
    torch._inductor.compile = refuse


def load_only(out_dir: str) -> int:
    """The fresh-process check: package + saved inputs + saved eager outputs, nothing else."""
    block_compilers()
    import torch._inductor

    saved = torch.load(os.path.join(out_dir, "inputs.pt"))
    eager = torch.load(os.path.join(out_dir, "eager.pt"))
    device = saved["device"]
    started = time.perf_counter()
    runner = torch._inductor.aoti_load_package(os.path.join(out_dir, "decision.pt2"))
    load_s = time.perf_counter() - started
    shapes = []
    for inputs, ref in zip(saved["inputs"], eager["outputs"]):
        args = [t.to(device) for t in inputs]
        with torch.no_grad():
            out = runner(*args)
        shapes.append({"shape": list(inputs[0].shape) + [inputs[2].shape[1]],
                       **compare(ref, out, inputs[3], saved["tolerance"])})
    print(json.dumps({"load_s": load_s, "shapes": shapes, "modules_laya_loaded": "laya" in sys.modules}))
    return 0


# ---- the main check --------------------------------------------------------------------------------


def nvidia_smi() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def build_requests(agent, max_len: int) -> list[tuple]:
    """Real tokenised, collated requests (the Agent's own row builder), padded into the package ranges."""
    from laya.questions import check_questions, keeps_tail, render_state
    from laya.sequence import collate

    head_max_len = int(agent.cfg.get("head_max_len", 192))
    batches = []
    for states, qids in REQUESTS:
        qs = check_questions({q: QUESTIONS[q] for q in qids})
        rows = [r for s in states for r in agent._rows(render_state(s), keeps_tail(s), qs, max_len, head_max_len)[1]]
        batches.append(collate(rows, agent.tok.pad_token_id).tensors())
    return batches


def timed(fn, args_list: list, device: str, groups: int, repeats: int, warmup: int) -> list[float]:
    """Median ms per forward for each input: median over `groups` groups of `repeats` calls."""
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    out = []
    for args in args_list:
        with torch.no_grad():
            for _ in range(warmup):
                fn(*args)
            sync()
            samples = []
            for _ in range(groups):
                started = time.perf_counter()
                for _ in range(repeats):
                    fn(*args)
                sync()
                samples.append((time.perf_counter() - started) * 1e3 / repeats)
        out.append(statistics.median(samples))
    return out


def check(args: argparse.Namespace, results: dict) -> bool:
    import laya
    from laya.export import aoti

    device = results["device"]
    dtype_name = args.dtype if args.dtype != "auto" else ("bf16" if device == "cuda" else "fp32")
    dtype, tol = DTYPES[dtype_name], TOLERANCES[dtype_name]
    results.update(dtype=dtype_name, tolerance=tol)
    ranges = aoti.Ranges(rows=(1, args.max_rows), markers=(2, args.max_markers), tokens=(32, args.max_tokens))
    results["ranges"] = {"rows": ranges.rows, "markers": ranges.markers, "tokens": ranges.tokens,
                         "token_multiple": aoti.TOKEN_MULTIPLE}

    model_dir = args.model
    if model_dir is None:
        sys.path.insert(0, os.path.join(REPO, "scripts"))
        from make_checkpoint import make_checkpoint

        model_dir = make_checkpoint(os.path.join(tempfile.mkdtemp(prefix="laya-aoti-"), "tiny"), "tiny",
                                    "wordpiece", seed=0, std=0.1)
        results["model"] = "tiny random ModernBERT (scripts/make_checkpoint.py tiny, seed 0, std 0.1)"
    else:
        results["model"] = os.path.abspath(model_dir)
    agent = laya.load(model_dir, device=device)
    fp32_model = agent.model.eval()
    pad = agent.tok.pad_token_id
    max_len = min(int(agent.cfg.get("max_len", 512)), ranges.tokens[1])
    raw = build_requests(agent, max_len)
    inputs = [tuple(t.to(device) for t in aoti.fit_inputs(r, ranges, pad)) for r in raw]
    results["request_shapes"] = [{"rows": r[0].shape[0], "tokens": r[0].shape[1], "marker_slots": r[2].shape[1],
                                  "padded_tokens": i[0].shape[1], "padded_slots": i[2].shape[1],
                                  "live_markers_per_row": r[3].sum(-1).tolist()} for r, i in zip(raw, inputs)]

    out_dir = args.output_dir
    package_path = os.path.join(out_dir, "decision.pt2")
    # export + package a separate explicit-dtype copy, with laya's record (ranges, device, weights)
    built = aoti.build_package(fp32_model, package_path, ranges, dtype, device, pad_id=pad)
    results.update({key: built[key] for key in ("export_s", "package_s", "package_bytes")})
    results["export_example_shape"] = built["example_shape"]
    results["package_info"] = aoti.read_info(package_path)
    explicit = aoti.explicit_copy(fp32_model, dtype, device)  # the eager reference in the package's dtype
    started = time.perf_counter()
    runner = aoti.load_package(package_path)
    results["load_s"] = time.perf_counter() - started

    with torch.no_grad():
        eager_out = [tuple(t.detach().cpu() for t in explicit(*x)) for x in inputs]
        fp32_out = [tuple(t.detach().cpu() for t in fp32_model(*[t.to(device) for t in r])) for r in raw]
        package_out = [tuple(t.detach().cpu() for t in runner(*x)) for x in inputs]
    torch.save({"inputs": [tuple(t.cpu() for t in x) for x in inputs], "device": device, "dtype": dtype_name,
                "tolerance": tol, "shapes": results["request_shapes"]}, os.path.join(out_dir, "inputs.pt"))
    torch.save({"outputs": eager_out, "what": f"explicit {dtype_name} eager copy on the padded inputs"},
               os.path.join(out_dir, "eager.pt"))

    results["parity_in_process"] = [compare(e, p, x[3], tol) for e, p, x in zip(eager_out, package_out, inputs)]
    # Against the fp32 model on the unpadded request: shows padding + dtype cost together (reported only).
    loose = {"prob": float("inf"), "logits_atol": None}
    results["vs_fp32_unpadded"] = [compare(f, (p[0][:, :r[2].shape[1]], p[1]), r[3], loose)
                                   for f, p, r in zip(fp32_out, package_out, raw)]

    env = dict(os.environ, PYTHONPATH="")  # the fresh process must not find laya, or need the checkpoint
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--load-only", out_dir], capture_output=True,
                          text=True, env=env, cwd=out_dir, timeout=600)
    results["fresh_process_s"] = time.perf_counter() - started
    if proc.returncode != 0:
        results["fresh_process_error"] = proc.stderr[-4000:]
        results["parity_fresh_process"] = None
    else:
        fresh = json.loads(proc.stdout.strip().splitlines()[-1])
        results["fresh_load_s"] = fresh["load_s"]
        results["fresh_process_imported_laya"] = fresh["modules_laya_loaded"]
        results["parity_fresh_process"] = fresh["shapes"]

    results["latency_ms"] = latency(args, device, dtype, fp32_model, explicit, runner, inputs)
    del runner
    results["backend_parity"] = backend_parity(agent, package_path, dtype_name)
    ok = all(p["ok"] for p in results["parity_in_process"])
    ok = ok and results["parity_fresh_process"] is not None and all(p["ok"] for p in results["parity_fresh_process"])
    ok = ok and results["backend_parity"]["ok"]
    return bool(ok and not results.get("fresh_process_imported_laya"))


def answer_key(answer: dict) -> tuple:
    """(decision, probabilities) of one answer dict: the choice, the most likely score level, or
    noul's side; the option probabilities (noul: p(true)) and the act probability. Rounded values."""
    kind = answer["type"]
    act = answer["action"]["act_probability"]
    if kind == "noul":
        return answer["noul"] >= 0.5, [answer["noul"], act]
    probs = answer["probabilities"]
    decision = answer["choice"] if kind == "choice" else max(probs, key=probs.get)
    return decision, [*probs.values(), act]


def answer_deltas(reference: list[dict], got: list[dict]) -> dict:
    """Answers that agree and the largest probability difference between two predict_batch results."""
    same = total = 0
    delta = 0.0
    for r, g in zip(reference, got):
        for qid, answer in r["answers"].items():
            (want, p), (have, q) = answer_key(answer), answer_key(g["answers"][qid])
            same += int(want == have)
            total += 1
            delta = max(delta, *(abs(x - y) for x, y in zip(p, q)))
    return {"answers_agree": same, "answers": total, "max_abs_prob": delta}


def backend_parity(agent, package_path: str, dtype_name: str) -> dict:
    """`predict` through the aoti backend vs the agent's eager forward on the REQUESTS. With fp32
    weights both run the same math: answers must agree and probabilities stay within the fp32
    tolerance. A bf16 package against AMP eager (fp32 weights, bf16 autocast) is reported only."""
    reference = [agent.predict_batch(states, {q: QUESTIONS[q] for q in qids}) for states, qids in REQUESTS]
    started = time.perf_counter()
    name = agent.set_backend("aoti", strict=True, aoti_path=package_path)
    report = {"backend": name, "install_s": time.perf_counter() - started, "requests": []}
    try:
        for (states, qids), ref in zip(REQUESTS, reference):
            got = agent.predict_batch(states, {q: QUESTIONS[q] for q in qids})
            report["requests"].append({"states": len(states), "questions": len(qids), **answer_deltas(ref, got)})
    finally:
        agent.set_backend("eager")
    agree = all(r["answers_agree"] == r["answers"] for r in report["requests"])
    small = max(r["max_abs_prob"] for r in report["requests"]) <= TOLERANCES["fp32"]["prob"]
    report["ok"] = bool(agree and small) if dtype_name == "fp32" else True
    report["judged"] = dtype_name == "fp32"
    return report


def latency(args, device, dtype, fp32_model, explicit, runner, inputs) -> dict:
    """Side by side on the same padded requests: AMP eager/compiled, explicit eager/compiled, package."""
    import contextlib

    amp = lambda: torch.autocast(device, dtype=torch.bfloat16)  # noqa: E731
    none = contextlib.nullcontext
    variants = {}
    if device == "cuda" or args.amp_cpu:
        variants["amp_eager"] = (fp32_model, amp)
    variants[f"explicit_{'bf16' if dtype == torch.bfloat16 else 'fp32'}_eager"] = (explicit, none)
    if args.compiled_baselines or (args.compiled_baselines is None and device == "cuda"):
        if "amp_eager" in variants:
            variants["amp_compiled"] = (torch.compile(fp32_model, dynamic=True), amp)
        variants[f"explicit_{'bf16' if dtype == torch.bfloat16 else 'fp32'}_compiled"] = (
            torch.compile(explicit, dynamic=True), none)
    variants["aoti_package"] = (runner, none)
    table = {"shapes": [list(x[0].shape) + [x[2].shape[1]] for x in inputs], "groups": args.groups,
             "repeats": args.repeats, "warmup": args.warmup, "ms": {}}
    for name, (fn, scope) in variants.items():
        def call(*a, fn=fn, scope=scope):
            with scope():
                return fn(*a)
        table["ms"][name] = timed(call, inputs, device, args.groups, args.repeats, args.warmup)
    return table


def stopped(signum, _frame):
    """SIGTERM (e.g. from `timeout`) becomes an ordinary exception: the run records it and writes its JSON."""
    raise RuntimeError(f"stopped by signal {signum} (a time limit?) before this step finished")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", help="where decision.pt2, results.json, inputs.pt, eager.pt go")
    parser.add_argument("--model", default=None, help="local laya checkpoint directory (default: tiny random)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--dtype", default="auto", choices=("auto", "fp32", "bf16"),
                        help="weights of the exported copy (default bf16 on CUDA, fp32 on the CPU)")
    parser.add_argument("--compiled-baselines", action=argparse.BooleanOptionalAction, default=None,
                        help="also time torch.compile(dynamic=True) of both models (default: on for CUDA, off "
                             "on the CPU, where compiling them costs minutes)")
    parser.add_argument("--amp-cpu", action="store_true", help="also time AMP (bf16 autocast) eager on the CPU")
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--max-rows", type=int, default=8, help="largest batch (rows) the package accepts")
    parser.add_argument("--max-tokens", type=int, default=512, help="longest row, a multiple of 16")
    parser.add_argument("--max-markers", type=int, default=8, help="most marker slots (options) per row")
    parser.add_argument("--load-only", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, stopped)  # `timeout`: still write what was measured
    if args.load_only:
        return load_only(args.load_only)
    if not args.output_dir:
        parser.error("--output-dir is required")
    if min(args.groups, args.repeats) < 1 or args.warmup < 0:
        parser.error(f"--groups and --repeats must be >= 1 and --warmup >= 0, got {args.groups}, {args.repeats}, "
                     f"{args.warmup}")
    if args.max_rows < 1 or args.max_markers < 2 or args.max_tokens < 32 or args.max_tokens % 16:
        parser.error(f"--max-rows >= 1, --max-markers >= 2 and --max-tokens a multiple of 16 >= 32, got "
                     f"{args.max_rows}, {args.max_markers}, {args.max_tokens}")
    sys.path.insert(0, REPO)
    from laya.export import aoti

    os.makedirs(args.output_dir, exist_ok=True)
    device = resolve_device(args.device)
    results = {"status": None, "device": device, "torch": torch.__version__, "python": sys.version.split()[0],
               "platform": platform.platform(), "cpu": cpu_name(), "compiler": aoti.compiler(),
               "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "nvidia_smi_before": nvidia_smi()}
    try:
        import transformers
        results["transformers"] = transformers.__version__
    except ImportError:
        pass
    if device == "cuda" and torch.cuda.is_available():
        results["gpu"] = torch.cuda.get_device_name()
    reason = aoti.missing_capability(device)
    if reason is not None:
        results.update(status="skip", reason=reason)
        print(f"SKIP: {reason}")
        ok = True
    else:
        try:
            ok = check(args, results)
            results["status"] = "pass" if ok else "fail"
        except Exception as e:  # noqa: BLE001 - a packaging failure on a capable machine is a FAIL, with its trace
            ok = False
            results.update(status="fail", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-8000:])
    results["nvidia_smi_after"] = nvidia_smi()
    with open(os.path.join(args.output_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, default=str)
    if results["status"] != "skip":
        summary = {k: results.get(k) for k in ("status", "device", "dtype", "export_s", "package_s", "load_s",
                                               "fresh_load_s", "package_bytes", "error")}
        print(json.dumps(summary))
        if "latency_ms" in results:
            print(json.dumps(results["latency_ms"]["ms"]))
        print(f"{results['status'].upper()}: results in {os.path.join(args.output_dir, 'results.json')}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
