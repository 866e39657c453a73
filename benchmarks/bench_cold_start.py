"""Time from process start to the first answer, fresh interpreters, with an empty and a warm kernel store.

    HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python benchmarks/bench_cold_start.py [--shape large] [--runs 3]
        [--checkpoint DIR] [--out PATH] [--only-empty] [--no-sync] [--warm-ab TREE]

tilelang cases (each process: `laya.Agent(path, device="cuda", backend="tilelang")` then one `predict` of
the triage preset; the clock starts before the interpreter does):
* ``store_empty``      an empty LAYA_KERNEL_CACHE (TileLang's cache inside it empty too): the first
                       answer waits for the warm-up shapes' classes, the rest build in the background;
* ``store_empty_sync`` the same, every class built before the first answer (the behaviour before the
                       store: ``set_backend("tilelang", background=False)``);
* ``store_warm``       the store from the runs above: kernels loaded, never traced or compiled;
* ``tilelang_only``    LAYA_KERNEL_CACHE=off with TileLang's own cache warm (the behaviour before the store);
* ``checkpoint_read``  `laya.Agent(path, device="cuda", backend="eager")` ready: imports, model build and
                       weights read; ``first_answer_minus_eager_agent`` subtracts it (an upper bound on
                       "excluding the checkpoint read": it removes the imports too).
* ``phases_store_warm`` imports one by one, the eager agent, FastLaya built from the warm store, its
                       warm-up (graph captures): where a warm start's seconds go.
``--warm-ab TREE`` times only ``store_warm`` and ``phases`` for TREE (e.g. a git archive of the previous
commit) and this tree, interleaved, on one store.
Medians over --runs processes (the empty cases: a fresh directory each).  JSON:
benchmarks/results/cold_start_tilelang_<date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)
from _env import bench_checkpoint, save_result  # noqa: E402
from laya.kernel_cache import directory_bytes  # noqa: E402

TEXT = "I was charged twice for my order and nobody answers my emails, please refund me today"

PHASES = r"""
import json, sys, time
t0 = float(sys.argv[1]); path = sys.argv[2]
marks = {"interpreter": time.time() - t0}
for name in ("torch", "transformers", "laya", "tilelang", "laya.fast"):
    __import__(name)
    marks["import_" + name] = time.time() - t0
import laya, torch
from laya.fast import FastLaya
from laya.sequence import config_max_len
agent = laya.Agent(path, device="cuda", backend="eager")
marks["eager_agent"] = time.time() - t0
fast = FastLaya(agent.model, max_len=config_max_len(agent.cfg), dtype=agent.dtype, pad_id=agent.tok.pad_token_id)
marks["fastlaya_built"] = time.time() - t0
fast.warmup()
marks["fastlaya_warmup"] = time.time() - t0
print("BENCH " + json.dumps({"marks": marks, "kernel_compile_s": fast.compile_s, "captures": fast.captures}))
"""

CHILD = r"""
import json, os, sys, time
t0 = float(sys.argv[1]); mode = sys.argv[2]; path = sys.argv[3]
marks = {"interpreter": time.time() - t0}
import laya
marks["import_laya"] = time.time() - t0
if mode == "sync":
    agent = laya.Agent(path, device="cuda", backend="eager")
    marks["checkpoint"] = time.time() - t0
    agent.set_backend("tilelang", strict=True, background=False)
elif mode == "read":
    agent = laya.Agent(path, device="cuda", backend="eager")
else:
    agent = laya.Agent(path, device="cuda", backend="tilelang")
marks["agent_ready"] = time.time() - t0
result = agent.predict(sys.argv[4], laya.triage_questions())
marks["first_answer"] = time.time() - t0
from laya import kernel_cache
store = kernel_cache.active()
fast = getattr(getattr(agent, "backend_object", None), "fast", None)
print("BENCH " + json.dumps({"marks": marks, "backend": getattr(agent, "backend", None),
    "store": None if store is None else {"hits": store.hits, "misses": store.misses, "root": store.root},
    "kernel_compile_s": getattr(fast, "compile_s", None),
    "answer": {n: a.get(a["type"]) for n, a in result["answers"].items()}}))
"""


def run_script(script: str, args: list[str], env: dict, root: str = REPO, timeout: float = 900,
               label: str = "child") -> dict:
    """`python -c script <start time> *args` in a fresh interpreter; its last `BENCH {json}` line, with the
    wall time and stderr's tail. It runs in `root`: `python -c` puts the working directory first on
    sys.path, so that tree's laya is the one imported."""
    start = time.time()
    out = subprocess.run([sys.executable, "-c", script, repr(start), *args], env=env, cwd=root,
                         capture_output=True, text=True, timeout=timeout)
    lines = [line for line in out.stdout.splitlines() if line.startswith("BENCH ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{label} failed (rc {out.returncode}): {out.stderr[-3000:]}")
    rec = json.loads(lines[-1][6:])
    rec["wall_s"] = round(time.time() - start, 3)
    rec["stderr_tail"] = out.stderr[-2000:]
    return rec


def child(mode: str, path: str, env: dict, root: str = REPO) -> dict:
    if mode == "phases":
        return run_script(PHASES, [path], env, root, label="phases child")
    return run_script(CHILD, [mode, path, TEXT], env, root, label=f"{mode} child")


def same_answers(records: list) -> bool:
    """Every record holds a complete answer (each question decided) and all are equal."""
    answers = [r.get("answer") or {} for r in records]
    return all(a and None not in a.values() for a in answers) and len({json.dumps(a, sort_keys=True)
                                                                      for a in answers}) == 1


def median_marks(records: list) -> dict:
    keys = records[0]["marks"].keys()
    return {k: round(statistics.median(r["marks"][k] for r in records), 3) for k in keys}


BYTECODE_MODULES = ("laya.agent", "laya.fast", "transformers.models.modernbert.modeling_modernbert",
                    "torch._inductor.compile_fx", "tilelang")
BYTECODE_NOTE = "children write .pyc once and reuse them (PYTHONDONTWRITEBYTECODE dropped), as an installed library"


def bytecode_env(env: dict) -> dict:
    """`env` with .pyc files kept, as pip leaves an installed library: the lent images set
    PYTHONDONTWRITEBYTECODE=1, and then every child recompiles ~4,000 modules (9.9 s of a profiled
    H100-host restart: results/start_profile_compile_h100_2026-12-06.json)."""
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "laya-bench-pycache"))
    return env


def warm_bytecode(env: dict, roots: list[str]) -> None:
    """One untimed import of the heavy modules per tree, so no timed child pays their compilation."""
    script = "import importlib\nfor name in %r:\n    try:\n        importlib.import_module(name)\n" \
             "    except Exception:\n        pass\n" % (BYTECODE_MODULES,)
    for root in roots:
        subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, timeout=900)


def child_env() -> dict:
    """The children's environment: offline, .pyc kept, and TileLang's cache wherever each case puts it."""
    env = bytecode_env(dict(os.environ, HF_HUB_OFFLINE="1"))
    env.pop("TILELANG_CACHE_DIR", None)
    return env


def run_empty_only(path: str, runs: int) -> dict:
    """checkpoint_read and store_empty alone (an A/B of background builds between trees)."""
    base_env = child_env()
    warm_bytecode(base_env, [REPO])
    scratch = tempfile.mkdtemp(prefix="laya-cold-")
    try:
        cases = {"checkpoint_read": [child("read", path, dict(base_env, LAYA_KERNEL_CACHE="off")) for _ in range(runs)],
                 "store_empty": [child("public", path, dict(base_env, LAYA_KERNEL_CACHE=os.path.join(scratch, f"e{i}")))
                                 for i in range(runs)]}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {name: median_marks(recs) for name, recs in cases.items()}
    summary["store_empty"]["first_answer_minus_eager_agent"] = round(
        summary["store_empty"]["first_answer"] - summary["checkpoint_read"]["agent_ready"], 3)
    return {"cases": cases, "summary": summary}


def run_tilelang(path: str, runs: int, keep: str | None = None, sync: bool = True) -> dict:
    base_env = child_env()
    warm_bytecode(base_env, [REPO])
    cases: dict = {}
    scratch = keep or tempfile.mkdtemp(prefix="laya-cold-")
    try:
        cases["checkpoint_read"] = [child("read", path, dict(base_env, LAYA_KERNEL_CACHE="off",
                                                             TILELANG_CACHE_DIR=os.path.join(scratch, "tl0")))
                                    for _ in range(runs)]
        empty, synced = [], []
        for i in range(runs):
            empty.append(child("public", path, dict(base_env, LAYA_KERNEL_CACHE=os.path.join(scratch, f"e{i}"))))
            if sync:
                synced.append(child("sync", path, dict(base_env, LAYA_KERNEL_CACHE=os.path.join(scratch, f"s{i}"))))
        cases["store_empty"] = empty
        if sync:
            cases["store_empty_sync"] = synced
            warm_root = os.path.join(scratch, f"s{runs - 1}")  # complete: every class was built there
        else:
            warm_root = os.path.join(scratch, "full")
            child("sync", path, dict(base_env, LAYA_KERNEL_CACHE=warm_root))  # fills every class, not timed
        cases["store_warm"] = [child("public", path, dict(base_env, LAYA_KERNEL_CACHE=warm_root))
                               for _ in range(runs)]
        cases["tilelang_only"] = [child("public", path, dict(base_env, LAYA_KERNEL_CACHE="off",
                                                             TILELANG_CACHE_DIR=os.path.join(warm_root, "tilelang")))
                                  for _ in range(runs)]
        cases["phases_store_warm"] = [child("phases", path, dict(base_env, LAYA_KERNEL_CACHE=warm_root))
                                      for _ in range(runs)]
        size = directory_bytes(warm_root)
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    summary = {name: median_marks(recs) for name, recs in cases.items()}
    read = summary["checkpoint_read"]["agent_ready"]
    for name in [n for n in ("store_empty", "store_empty_sync", "store_warm", "tilelang_only") if n in summary]:
        summary[name]["first_answer_minus_eager_agent"] = round(summary[name]["first_answer"] - read, 3)
    return {"cases": cases, "summary": summary, "store_size_mb": round(size / 2**20, 1),
            "same_answers_in_every_case": same_answers(
                [r for name in cases if name != "checkpoint_read" and "answer" in cases[name][0] for r in cases[name]]),
            "ratio_warm_vs_tilelang_only": round(summary["tilelang_only"]["first_answer"]
                                                 / summary["store_warm"]["first_answer"], 2),
            "ratio_empty_vs_empty_sync": round(summary["store_empty_sync"]["first_answer"]
                                               / summary["store_empty"]["first_answer"], 2) if sync else None}


def run_warm_ab(path: str, runs: int, baseline_root: str) -> dict:
    """Warm-store starts of two trees, interleaved, on one store (built once, by this tree, not timed)."""
    base_env = child_env()
    warm_bytecode(base_env, [baseline_root, REPO])
    scratch = tempfile.mkdtemp(prefix="laya-cold-")
    try:
        store = dict(base_env, LAYA_KERNEL_CACHE=os.path.join(scratch, "full"))
        child("sync", path, store)
        cases: dict = {"baseline_store_warm": [], "store_warm": [], "baseline_phases": [], "phases": []}
        for _ in range(runs):
            for prefix, root in (("baseline_", baseline_root), ("", REPO)):
                cases[prefix + "store_warm"].append(child("public", path, store, root))
                cases[prefix + "phases"].append(child("phases", path, store, root))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary = {name: median_marks(recs) for name, recs in cases.items()}
    return {"baseline_root": baseline_root, "cases": cases, "summary": summary,
            "same_answers_in_every_case": same_answers(cases["store_warm"] + cases["baseline_store_warm"]),
            "ratio_warm_first_answer_baseline_over_candidate": round(
                summary["baseline_store_warm"]["first_answer"] / summary["store_warm"]["first_answer"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="large")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-sync", action="store_true", help="skip the store_empty_sync case (the slowest)")
    ap.add_argument("--only-empty", action="store_true",
                    help="only checkpoint_read and store_empty (A/B of background builds between two trees)")
    ap.add_argument("--warm-ab", default=None, metavar="TREE",
                    help="only warm-store starts, interleaved with another tree's (e.g. a git archive of HEAD)")
    ap.add_argument("--keep", default=None, help="keep the stores in this (new) directory instead of a temporary one")
    args = ap.parse_args()
    path = args.checkpoint or bench_checkpoint(args.shape)
    import torch

    record = {"benchmark": "benchmarks/bench_cold_start.py", "issue": 24, "date": dt.date.today().isoformat(),
              "shape": args.shape, "runs": args.runs,
              "bytecode": BYTECODE_NOTE, "gpu": torch.cuda.get_device_name(0),
              "targets": {"store_empty_first_answer_s_excluding_read": 15, "store_warm_first_answer_s_excluding_read": 3,
                          "store_size_mb": 200},
              **(run_warm_ab(path, args.runs, args.warm_ab) if args.warm_ab else
                 run_empty_only(path, args.runs) if args.only_empty else
                 run_tilelang(path, args.runs, args.keep, not args.no_sync))}
    out = save_result(record, f"cold_start_tilelang_{record['date']}.json", args.out)
    if args.only_empty or args.warm_ab:
        print(json.dumps(record["summary"], indent=1))
        if args.warm_ab:
            print(f"warm first answer, baseline / candidate: {record['ratio_warm_first_answer_baseline_over_candidate']}")
        print(out)
        return
    print(f"{'case':<18}{'import':>8}{'ready':>8}{'first':>8}{'minus read':>11}")
    for name, m in record["summary"].items():
        if "agent_ready" not in m:
            print(name, {k: round(v, 2) for k, v in m.items()})
            continue
        print(f"{name:<18}{m['import_laya']:>8.2f}{m['agent_ready']:>8.2f}{m.get('first_answer', 0):>8.2f}"
              f"{m.get('first_answer_minus_eager_agent', 0):>11.2f}")
    print(f"store {record['store_size_mb']} MB; warm vs tilelang-only {record['ratio_warm_vs_tilelang_only']}x; "
          f"empty vs empty-sync {record['ratio_empty_vs_empty_sync']}x; same answers {record['same_answers_in_every_case']}")
    print(out)


if __name__ == "__main__":
    main()
