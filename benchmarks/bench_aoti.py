"""The aoti backend (an AOTInductor .pt2 package) against eager and compile, in one process, one GPU.

    python benchmarks/bench_aoti.py --model CKPT --package PKG.pt2 [--shapes 2x128x3,1x256x3,4x160x5]
        [--backends eager,aoti,compile] [--repeats 30] [--warmup 5] [--device auto] [--out PATH]

Shapes are states x state tokens x questions; every state gets its own row per question, so 4x160x5
is 20 model rows. One agent, one set of weights: backends are switched with `set_backend(...,
strict=True)` in the order given (compile last by default: its cold compile is the long step, and
the JSON is rewritten after every backend, so a run cut short keeps what it measured).
  eager    the stock forward; on CUDA fp32 weights under bf16 autocast (the agent's AMP policy)
  aoti     the package (PKG, built by scripts/check_aoti.py or laya.export.aoti.build_package: bf16
           weights on CUDA, no autocast inside); rows, tokens and marker slots must fit its ranges
  compile  the compile backend (torch.compile dynamic, reduce-overhead, bucketed), warmup=False so its
           compile time shows as each shape's first call (CUDA only; skipped elsewhere)
Per shape and backend: the first call, then `warmup` calls, then `repeats` timed calls of
  predict  agent.predict_batch end to end (tokenise, collate, forward, decode)
  forward  agent._infer on the already collated batch (host->device, forward, device->host, act softmax)
and the answers' agreement with eager (decisions, largest probability difference; answers are
rounded to 4 decimals). Ratios: eager/aoti and compile/aoti medians (> 1 means aoti is faster).

The H200 run (about 8 minutes, no network; the tokenizer comes from laya-mini):
    W=/tmp/laya-aoti; LAYA_WORDPIECE_DIR=$PWD/laya/laya_mini/tokenizer \
        python3 scripts/make_checkpoint.py $W/base --shape base --seed 0
    TORCHINDUCTOR_CACHE_DIR=$W/ind-aoti timeout 330 python3 scripts/check_aoti.py --model $W/base \
        --device cuda --output-dir $W/check --max-rows 32 --no-compiled-baselines
    TORCHINDUCTOR_CACHE_DIR=$W/ind-compile LAYA_INDUCTOR_CACHE_DIR=$W/ind-compile python3 \
        benchmarks/bench_aoti.py --model $W/base --package $W/check/decision.pt2 --device cuda
(--max-rows 32: 4x160x5 is 20 rows, one package call; separate Inductor caches keep compile cold.)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts"), os.path.join(ROOT, "benchmarks")]

from _workload import TICKET_QUESTIONS, ticket_questions  # noqa: E402

WORDS = ("refund order invoice charged twice login crash app password cancel plan support please today account "
         "billing error screen update broken slow help angry again week card payment failed subscription").split()
DEFAULT_SHAPES = "2x128x3,1x256x3,4x160x5"


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"bad shape {item!r}: use STATESxTOKENSxQUESTIONS, e.g. 2x128x3")
        states, tokens, questions = map(int, parts)
        if questions > len(TICKET_QUESTIONS):
            raise SystemExit(f"at most {len(TICKET_QUESTIONS)} questions per shape, got {questions}")
        shapes.append((states, tokens, questions))
    return shapes


def state_text(tok, index: int, tokens: int) -> str:
    """A ticket-like text of about `tokens` tokens (without specials) under `tok`; states differ by index."""
    words: list[str] = []
    j = 0
    while True:
        words.append(WORDS[(index * 7 + j * 3) % len(WORDS)])
        j += 1
        if j % 8 == 0 or len(words) >= tokens:
            if len(tok(" ".join(words), add_special_tokens=False)["input_ids"]) >= tokens:
                break
    while len(words) > 1 and len(tok(" ".join(words[:-1]), add_special_tokens=False)["input_ids"]) >= tokens:
        words.pop()
    return " ".join(words)


def build_case(agent, shape: tuple[int, int, int]) -> dict:
    from laya.questions import check_questions
    from laya.sequence import collate, tokenizer_view

    n_states, tokens, n_questions = shape
    questions = ticket_questions(n_questions)
    states = [state_text(agent.tok, i, tokens) for i in range(n_states)]
    qs = check_questions(questions)
    max_len = int(agent.cfg.get("max_len", 512))
    head_max_len = int(agent.cfg.get("head_max_len", 192))
    rows = [r for s in states for r in agent._rows(s, False, qs, max_len, head_max_len)[1]]
    batch = collate(rows, tokenizer_view(agent.tok).pad_id)
    return {"shape": shape, "states": states, "questions": questions, "batch": batch,
            "rows": len(rows), "row_tokens": [len(r.ids) for r in rows], "marker_slots": batch.marker_pos.shape[1],
            "state_tokens": [len(agent.tok(s, add_special_tokens=False)["input_ids"]) for s in states]}


def sync(agent) -> None:
    import torch

    if agent.device.type == "cuda":
        torch.cuda.synchronize(agent.device)


def timed_ms(agent, fn, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        sync(agent)
        started = time.perf_counter()
        fn()
        sync(agent)
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50": statistics.median(ordered), "p10": ordered[len(ordered) // 10],
            "p90": ordered[min(len(ordered) - 1, (9 * len(ordered)) // 10)], "mean": statistics.fmean(ordered),
            "n": len(ordered)}


def measure_backend(agent, name: str, options: dict, cases: list[dict], reference: dict | None, args) -> dict:
    from check_aoti import answer_deltas

    started = time.perf_counter()
    installed = agent.set_backend(name, strict=True, **options)
    out = {"backend": installed, "install_s": time.perf_counter() - started, "shapes": {}}
    backend = agent.backend_object
    for attr in ("load_s", "warmup_s", "cache_dir", "mode"):
        if hasattr(backend, attr):
            out[attr] = getattr(backend, attr)
    for case in cases:
        key = "x".join(map(str, case["shape"]))
        predict = lambda c=case: agent.predict_batch(c["states"], c["questions"])  # noqa: E731
        forward = lambda c=case: agent._infer(c["batch"])  # noqa: E731
        sync(agent)
        started = time.perf_counter()
        answers = predict()
        sync(agent)
        first_ms = (time.perf_counter() - started) * 1e3
        for _ in range(args.warmup):
            predict()
            forward()
        row = {"first_call_ms": first_ms, "predict_ms": summary(timed_ms(agent, predict, args.repeats)),
               "forward_ms": summary(timed_ms(agent, forward, args.repeats))}
        if name == "eager":
            reference[key] = answers
        elif key in reference:
            row["vs_eager"] = answer_deltas(reference[key], answers)
        out["shapes"][key] = row
        agree = row.get("vs_eager")
        print(f"  {name:8s} {key:10s} first {first_ms:9.1f} ms  predict p50 {row['predict_ms']['p50']:8.2f} ms  "
              f"forward p50 {row['forward_ms']['p50']:8.2f} ms"
              + (f"  answers {agree['answers_agree']}/{agree['answers']} max dp {agree['max_abs_prob']:.4f}"
                 if agree else ""), flush=True)
    return out


def ratios(results: dict) -> dict:
    table: dict = {}
    base = results.get("aoti", {}).get("shapes")
    if not base:
        return table
    for key, row in base.items():
        entry = {}
        for other in ("eager", "compile"):
            theirs = results.get(other, {}).get("shapes", {}).get(key)
            if theirs:
                for what in ("predict_ms", "forward_ms"):
                    entry[f"{other}_over_aoti_{what[:-3]}"] = theirs[what]["p50"] / row[what]["p50"]
        table[key] = entry
    return table


def gpu_facts() -> dict:
    import torch

    facts = {"cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        facts.update(gpu=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
                     cuda=torch.version.cuda)
        try:
            facts["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.used,memory.total,utilization.gpu,clocks.sm",
                 "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            facts["nvidia_smi"] = f"unavailable: {e}"
    return facts


def stopped(signum, _frame):
    """SIGTERM (e.g. from `timeout`) becomes an ordinary exception: the run records it and writes its JSON."""
    raise RuntimeError(f"stopped by signal {signum} (a time limit?) before this step finished")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="laya checkpoint directory (the package's source)")
    parser.add_argument("--package", required=True, help=".pt2 package of that checkpoint, for this device")
    parser.add_argument("--shapes", default=DEFAULT_SHAPES, help="STATESxTOKENSxQUESTIONS, comma separated")
    parser.add_argument("--backends", default="eager,aoti,compile")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/aoti_<gpu>_<date>.json)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, stopped)  # `timeout`: still write what was measured
    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    shapes = parse_shapes(args.shapes)

    import torch

    import laya
    from _env import environment
    from laya.export import aoti

    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    facts = gpu_facts()
    tag = (facts.get("gpu") or "cpu").lower().replace("nvidia", "").strip().replace(" ", "-")
    out_path = args.out or os.path.join(ROOT, "benchmarks", "results",
                                        f"aoti_{tag}_{datetime.date.today().isoformat()}.json")
    started = time.perf_counter()
    agent = laya.load(args.model, device=device)
    load_s = time.perf_counter() - started
    params = sum(p.numel() for p in agent.model.parameters())
    cases = [build_case(agent, shape) for shape in shapes]
    report = {
        "benchmark": "aoti_backend", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        **facts, "torch": torch.__version__, "env": environment(),
        "model": {"path": os.path.abspath(args.model), "encoder": agent.cfg.get("encoder"), "params": params,
                  "load_s": load_s},
        "agent": {"device": agent.device.type, "dtype": str(agent.dtype).replace("torch.", ""),
                  "amp": agent.amp_enabled},
        "package": {"path": os.path.abspath(args.package),
                    "bytes": os.path.getsize(args.package) if os.path.isfile(args.package) else None,
                    "info": aoti.read_info(args.package) if os.path.isfile(args.package) else None},
        "shapes": [{"states": c["shape"][0], "state_tokens_target": c["shape"][1], "questions": c["shape"][2],
                    "rows": c["rows"], "row_tokens": c["row_tokens"], "marker_slots": c["marker_slots"],
                    "state_tokens": c["state_tokens"]} for c in cases],
        "repeats": args.repeats, "warmup": args.warmup, "order": names, "results": {}, "errors": {},
    }

    def write() -> None:
        report["ratios"] = ratios(report["results"])
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)

    print(f"{facts.get('gpu', 'cpu')}, torch {torch.__version__}, {params / 1e6:.0f}M parameters, agent "
          f"{agent.device.type} {report['agent']['dtype']} amp={agent.amp_enabled}", flush=True)
    reference: dict = {}
    for name in names:
        options = {"aoti": {"aoti_path": args.package}, "compile": {"warmup": False}}.get(name, {})
        try:
            report["results"][name] = measure_backend(agent, name, options, cases, reference, args)
        except Exception as e:  # noqa: BLE001 - recorded; the other backends still run
            report["errors"][name] = f"{type(e).__name__}: {e}"
            print(f"  {name}: {report['errors'][name]}", flush=True)
        finally:
            try:
                agent.set_backend("eager")
            except Exception as e:  # noqa: BLE001
                report["errors"][f"{name}_uninstall"] = f"{type(e).__name__}: {e}"
        write()
    for key, entry in report["ratios"].items():
        print(f"ratios {key}: " + ", ".join(f"{k} {v:.2f}x" for k, v in entry.items()), flush=True)
    print(f"wrote {out_path}", flush=True)
    return 0 if not report["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
