"""End-to-end `predict` latency and throughput: eager vs compile vs tilelang (issue 5, "Speed").

    HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python benchmarks/bench_latency.py [--model DIR | --shape large]
        [--backends eager,tilelang,compile] [--device cuda] [--dtype bf16|fp16] [--repeats N]
        [--batch-repeats N] [--case-budget-s S] [--json PATH] [--quick] [--tiles JSON]

One agent is loaded once; each backend is installed on it in turn (`eager` = the Agent default: the
stock forward under 16-bit autocast on CUDA; `compile` = `set_backend("compile", strict=True)`, i.e.
torch.compile mode reduce-overhead; `tilelang` = `set_backend("tilelang", strict=True)`, the fused
forward of laya/fast.py). A backend that fails to install is reported as unavailable, with its
error, and the run goes on. Every case is timed end to end through the public API (`agent.predict`
or `agent.predict_batch`: validation, tokenisation, rows, collation, forward, host copies, decoding):

  a72   1 state x 1 question, rows of ~72 tokens
  a128  1 state x 1 question, rows of ~128 tokens
  b     1 state x 10 questions, rows of ~128 tokens
  c     1 state x 3 questions, rows of ~500 tokens
  d     64 states x 5 questions, ragged: each state's mean row length drawn uniformly from 60-500
        tokens (seeded; ~90k real tokens on the large shape, like the baseline in toolchain.md), one
        predict_batch call; real (unpadded) tokens/s = sum of real row lengths / time, and states/s

State texts are built so that the tokenised rows hit the target length exactly (the mean over a
state's questions; rows are reported as they really are). Each case gets warm-up calls first (they
capture CUDA graphs / compile the new shapes; their time is recorded), then timed calls until the
repeat count or the per-case time budget is reached. Each call is bracketed by
torch.cuda.synchronize(). p50/p90 over the timed calls.

Answers are compared against eager (or the first backend run): top answer per question (argmax of
the probabilities; noul: P(true) > 0.5), disagreements (all, and where the reference's top-two
margin is >= 0.05), max |dp| over all answer probabilities and max |d act_probability|.

A per-stage breakdown at cases a128 and d (for every backend, tilelang first in the summary) wraps laya's
own pipeline functions with timers: encode_view (tokenisation), rows_for (rows, per state),
collate, Agent._infer (H2D copies, forward, D2H copies, act softmax) and Predictor._result
(decoding); the forward itself is `agent.model.forward` wrapped with torch.cuda.synchronize()
before and after (its host-side time until return is recorded too). Approximate: the timers and
the two extra synchronisations add a few microseconds. It also records the calling thread's CPU time
outside the forward (against the wall time there) and the cores the calls started on: when the same code
runs slower in one process than in another, they tell a descheduled thread from a slow core.

Results: a JSON (default benchmarks/results/latency_<gpu-or-cpu>_<date>.json; written after every
backend, so a killed run keeps what it measured) and a ratio table printed last, against the
issue's goals: a128 p50 <= 1.5 ms; tilelang >= 8x eager and >= 2x compile at one question;
>= 600k real tokens/s on d.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, REPO_ROOT)  # time the working tree's laya, not some installed copy
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
sys.path.insert(0, HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _env import bench_checkpoint, environment, package_version, tile_entries  # noqa: E402
from _workload import TICKET_QUESTIONS, ticket_questions  # noqa: E402

GOALS = {"a128_p50_ms": 1.5, "speedup_vs_eager": 8.0, "speedup_vs_compile": 2.0, "d_tokens_per_s": 600_000}
CLEAR_MARGIN = 0.05  # reference top-two margin above which a changed top answer counts as a clear disagreement
SEED = 1234

# Ten questions of the three types, short heads (20-40 tokens), so a 72-token row still holds a state.

WORDS = ("the customer wrote that order arrived late and invoice shows charge they do not recognise please help "
         "fix account login because app keeps crashing after update support has replied for days we want refund "
         "or replacement today thanks my password reset link goes to old email team depends on this work every "
         "morning sync fails with error code screen parcel box was crushed plan price billed twice card statement "
         "week manager service down again slow broken angry waiting still nothing happened since monday friday "
         "client presentation tomorrow really need working version laptop phone settings page export file rows "
         "cut off delivery tracking number company name wrong tax address changed").split()


@dataclass
class Case:
    key: str
    title: str
    states: int
    questions: int
    target: int | tuple[int, int]  # mean row length per state (a range: drawn per state)
    batch: bool = False


CASES = (
    Case("a72", "1 state x 1 question, ~72 tok", 1, 1, 72),
    Case("a128", "1 state x 1 question, ~128 tok", 1, 1, 128),
    Case("b", "1 state x 10 questions, ~128 tok", 1, 10, 128),
    Case("c", "1 state x 3 questions, ~500 tok", 1, 3, 500),
    Case("d", "64 states x 5 q, ragged 60-500", 64, 5, (60, 500), batch=True),
)

# One question at ~128 tokens (the latency goal) and the ragged batch (the throughput goal): where their
# time goes outside the forward.
BREAKDOWN_CASES = ("a128", "d")

# ---- checkpoint ---------------------------------------------------------------------------------

# ---- inputs -------------------------------------------------------------------------------------

def limits(agent) -> tuple[int, int]:
    from laya.sequence import DEFAULT_MAX_LEN
    from laya.sequence import DEFAULT_HEAD_MAX_LEN

    return int(agent.cfg.get("max_len", DEFAULT_MAX_LEN)), int(agent.cfg.get("head_max_len", DEFAULT_HEAD_MAX_LEN))


class StateMaker:
    """Ticket-like texts with an exact number of state tokens under the agent's tokenizer."""

    def __init__(self, agent):
        from laya.sequence import encode_many

        self.tok = agent.tok
        self.encode_many = encode_many
        self.counts: dict[str, int] = {}
        self._count(WORDS)
        singles = [w for w in WORDS if self.counts[w] == 1]
        self.filler = singles or [min(WORDS, key=lambda w: self.counts[w])]

    def _count(self, words) -> None:
        new = sorted({w for w in words if w not in self.counts})
        if new:
            for w, ids in zip(new, self.encode_many(self.tok, new)):
                self.counts[w] = len(ids)

    def tokens(self, text: str) -> int:
        return len(self.encode_many(self.tok, [text])[0])

    def make(self, n: int, rng: random.Random) -> str:
        words: list[str] = []
        total, sentence = 0, rng.randint(6, 14)
        while total < n:
            w = rng.choice(WORDS)
            sentence -= 1
            if sentence == 0:
                w, sentence = w + ".", rng.randint(6, 14)
            self._count([w])
            if total + self.counts[w] > n:
                w = rng.choice(self.filler)
            words.append(w)
            total += self.counts[w]
        text = " ".join(words)
        for _ in range(64):  # context effects (e.g. byte-level BPE): correct against the real count
            have = self.tokens(text)
            if have == n or not words:
                break
            if have > n:
                words.pop()
            else:
                words.append(rng.choice(self.filler))
            text = " ".join(words)
        return text


def head_plus_one(agent, qs) -> list[int]:
    """Row length of each question's row with an empty state: head tokens + the closing [SEP]."""
    max_len, head_max_len = limits(agent)
    return [len(r.ids) for r in agent._rows("", False, qs, max_len, head_max_len)[1]]


def build_inputs(agent, case: Case, maker: StateMaker, seed: int) -> dict:
    from laya.questions import check_questions

    max_len, head_max_len = limits(agent)
    questions = ticket_questions(case.questions)
    qs = check_questions(questions)
    fixed = head_plus_one(agent, qs)
    mean_fixed, max_fixed = statistics.fmean(fixed), max(fixed)
    rng = random.Random(f"{seed}-{case.key}")
    states, targets = [], []
    for _ in range(case.states):
        target = rng.randint(*case.target) if isinstance(case.target, tuple) else case.target
        need = max(1, min(round(target - mean_fixed), max_len - max_fixed))
        targets.append(target)
        states.append(maker.make(need, rng))
    lengths = []
    for text in states:
        lengths.extend(len(r.ids) for r in agent._rows(text, False, qs, max_len, head_max_len)[1])
    return {"states": states, "questions": questions, "targets": targets, "row_lengths": lengths,
            "rows": len(lengths), "real_tokens": int(sum(lengths)), "padded_width": max(lengths),
            "row_len_min": min(lengths), "row_len_mean": round(statistics.fmean(lengths), 1),
            "row_len_max": max(lengths)}


# ---- timing -------------------------------------------------------------------------------------

def sync_fn(agent):
    if agent.device.type == "cuda":
        device = agent.device
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def call_for(agent, case: Case, inputs: dict):
    states, questions = inputs["states"], inputs["questions"]
    if case.batch:
        return lambda: agent.predict_batch(states, questions)
    state = states[0]
    return lambda: [agent.predict(state, questions)]


def summarise(ms: list[float]) -> dict:
    arr = np.asarray(ms, dtype=np.float64)
    return {"n": int(arr.size), "p50_ms": float(np.percentile(arr, 50)), "p90_ms": float(np.percentile(arr, 90)),
            "mean_ms": float(arr.mean()), "min_ms": float(arr.min()), "max_ms": float(arr.max())}


def time_case(agent, case: Case, inputs: dict, warmup: int, repeats: int, budget_s: float) -> tuple[dict, list]:
    sync = sync_fn(agent)
    call = call_for(agent, case, inputs)
    gc.collect()
    start = time.perf_counter()
    for _ in range(warmup):
        call()
    sync()
    warmup_s = time.perf_counter() - start
    times, first = [], None
    deadline = time.perf_counter() + budget_s
    while len(times) < repeats and (len(times) < 3 or time.perf_counter() < deadline):
        sync()
        t0 = time.perf_counter()
        out = call()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        if first is None:
            first = out
    stats = summarise(times)
    stats["warmup_calls"], stats["warmup_s"] = warmup, round(warmup_s, 3)
    real = sum(r["usage"]["input_tokens"] for r in first)
    stats["real_tokens_per_call"] = int(real)
    stats["tokens_per_s_p50"] = real / (stats["p50_ms"] / 1e3)
    stats["states_per_s_p50"] = len(first) / (stats["p50_ms"] / 1e3)
    stats["times_ms"] = [round(t, 4) for t in times]
    return stats, first


# ---- per-stage breakdown ------------------------------------------------------------------------

class StageClock:
    """Timers around laya's pipeline stages and the backend forward (restored on exit)."""

    def __init__(self, agent):
        self.agent, self.sync = agent, sync_fn(agent)
        self.acc: dict[str, float] = {}
        self._module_saved: list = []
        self._instance_saved: list = []

    def _timed(self, name: str, fn):
        acc = self.acc

        def wrapped(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[name] = acc.get(name, 0.0) + time.perf_counter() - t
        return wrapped

    def _forward(self, fn):
        acc, sync = self.acc, self.sync

        def wrapped(*args, **kwargs):
            sync()
            cpu = time.thread_time()
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            returned = time.perf_counter()
            sync()
            done = time.perf_counter()
            acc["forward_cpu"] = acc.get("forward_cpu", 0.0) + time.thread_time() - cpu
            acc["forward_host"] = acc.get("forward_host", 0.0) + returned - t
            acc["forward"] = acc.get("forward", 0.0) + done - t
            return out
        return wrapped

    def _patch_instance(self, obj, name: str, new) -> None:
        self._instance_saved.append((obj, name, obj.__dict__.get(name, None), name in obj.__dict__))
        setattr(obj, name, new)

    def __enter__(self) -> "StageClock":
        agent = self.agent
        # the functions Predictor._answer calls through its own module's namespace
        module = sys.modules[type(agent)._answer.__module__]
        for name, stage in (("encode_view", "tokenise"), ("rows_for", "rows"), ("collate", "collate")):
            original = getattr(module, name)
            self._module_saved.append((module, name, original))
            setattr(module, name, self._timed(stage, original))
        self._patch_instance(agent, "_infer", self._timed("infer", agent._infer))
        self._patch_instance(agent, "_result", self._timed("decode", agent._result))
        backend = getattr(agent, "forward_backend", None)
        if backend is not None:  # the forward seam: Backend.call (trees before it: model.forward)
            self._patch_instance(backend, "call", self._forward(backend.call))
        else:
            self._patch_instance(agent.model, "forward", self._forward(agent.model.forward))
        return self

    def __exit__(self, *exc: Any) -> None:
        for module, name, original in reversed(self._module_saved):
            setattr(module, name, original)
        for obj, name, value, present in reversed(self._instance_saved):
            if present:
                obj.__dict__[name] = value
            else:
                obj.__dict__.pop(name, None)
        self._module_saved.clear()
        self._instance_saved.clear()


def current_cpu() -> int:
    """The CPU the calling thread runs on now (Linux; -1 elsewhere): which cores a process's requests ran on
    is one suspect when the same code's latency differs between processes."""
    try:
        with open("/proc/thread-self/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])  # field 39, counted after the comm field
    except (OSError, IndexError, ValueError):
        return -1


def breakdown(agent, case: Case, inputs: dict, calls: int) -> dict:
    call = call_for(agent, case, inputs)
    sync = sync_fn(agent)
    per_call: list[dict] = []
    cpus: set[int] = set()
    with StageClock(agent) as clock:
        for _ in range(calls):
            clock.acc.clear()
            sync()
            cpus.add(current_cpu())
            cpu0 = time.thread_time()
            t0 = time.perf_counter()
            call()
            total = time.perf_counter() - t0
            cpu_total = time.thread_time() - cpu0
            a = dict(clock.acc)
            row = {k: 1e3 * a.get(k, 0.0) for k in ("tokenise", "rows", "collate", "infer", "forward",
                                                       "forward_host", "decode")}
            row["total"] = 1e3 * total
            row["infer_minus_forward"] = row["infer"] - row["forward"]
            row["other"] = row["total"] - sum(row[k] for k in ("tokenise", "rows", "collate", "infer", "decode"))
            # The calling thread's CPU time outside the forward, against the wall time outside it: about
            # equal when the thread ran the whole time (a slow figure then means a slow core), lower when
            # it was descheduled.
            row["outside_forward"] = row["total"] - row["forward"]
            row["outside_forward_cpu"] = 1e3 * (cpu_total - a.get("forward_cpu", 0.0))
            per_call.append(row)
    keys = list(per_call[0])
    return {"calls": calls,
            "median_ms": {k: round(statistics.median(r[k] for r in per_call), 4) for k in keys},
            "mean_ms": {k: round(statistics.fmean(r[k] for r in per_call), 4) for k in keys},
            "cpus_seen": sorted(c for c in cpus if c >= 0),
            "method": "timers around the Predictor module's encode_view (tokenise), rows_for (rows), "
                      "collate (collate), Agent._infer (infer), Predictor._result (decode) and "
                      "agent.model.forward with torch.cuda.synchronize() before and after (forward; forward_host "
                      "= until it returned); infer_minus_forward = H2D copies, D2H copies, act softmax, lock; "
                      "other = total minus those stages (validation, hooks, result assembly); outside_forward = "
                      "total minus forward, outside_forward_cpu = the calling thread's CPU time in it "
                      "(time.thread_time); cpus_seen = the cores the calls started on"}


def print_breakdown(name: str, case: str, b: dict) -> None:
    m = b["median_ms"]
    print(f"  stage breakdown ({name}, {case}, median of {b['calls']} calls, ms): total {m['total']:.3f} = "
          f"tokenise {m['tokenise']:.3f} + rows {m['rows']:.3f} + collate {m['collate']:.3f} + "
          f"forward {m['forward']:.3f} (host until return {m['forward_host']:.3f}) + "
          f"H2D/D2H/act {m['infer_minus_forward']:.3f} + decode {m['decode']:.3f} + other {m['other']:.3f}; "
          f"outside the forward {m['outside_forward']:.3f} wall, {m['outside_forward_cpu']:.3f} thread CPU; "
          f"cores {b.get('cpus_seen')}", flush=True)


# ---- agreement ----------------------------------------------------------------------------------

def answer_vector(answer: dict) -> tuple[list[float], float]:
    if answer["type"] == "noul":
        p = [1.0 - float(answer["noul"]), float(answer["noul"])]
    else:
        p = [float(v) for v in answer["probabilities"].values()]
    return p, float(answer["action"]["act_probability"])


def compare(reference: list, other: list) -> dict:
    n = disagree = clear = 0
    max_dp = max_dact = 0.0
    for ref_result, res in zip(reference, other):
        for qid, ref_answer in ref_result["answers"].items():
            p_ref, a_ref = answer_vector(ref_answer)
            p, a = answer_vector(res["answers"][qid])
            n += 1
            max_dp = max(max_dp, max(abs(x - y) for x, y in zip(p_ref, p)))
            max_dact = max(max_dact, abs(a_ref - a))
            top_ref, top = int(np.argmax(p_ref)), int(np.argmax(p))
            if top_ref != top:
                disagree += 1
                ranked = sorted(p_ref, reverse=True)
                if len(ranked) < 2 or ranked[0] - ranked[1] >= CLEAR_MARGIN:
                    clear += 1
    return {"answers": n, "disagree": disagree, "disagree_clear": clear, "max_dp": round(max_dp, 5),
            "max_d_act": round(max_dact, 5)}


# ---- backends -----------------------------------------------------------------------------------

VARIANTS = {"tilelang-fp8": ("tilelang", {"precision": "fp8"}),  # bench names beyond the backends' own
            "tilelang-no-cublas": ("tilelang", {}), "tilelang-tiles": ("tilelang", {})}
# Tile-table A/Bs (issue 26): the table with its cuBLAS classes on TileLang's tiles; the table with --tiles' entries
NO_CUBLAS, TILES = "tilelang-no-cublas", "tilelang-tiles"
TILE_OVERRIDES: dict = {}  # --tiles, parsed


def variant_table(name: str, shipped: dict) -> dict:
    from laya.fast_tiles import with_tiles, without_cublas

    return without_cublas(shipped) if name == NO_CUBLAS else with_tiles(shipped, TILE_OVERRIDES)


def install(agent, name: str) -> dict:
    info: dict = {}
    backend_name, options = VARIANTS.get(name, (name, {}))
    if name == "eager":
        agent.deaccelerate()  # the Agent default: the stock forward (under 16-bit autocast on CUDA)
    elif name in (NO_CUBLAS, TILES):
        import laya.fast as fast_module

        shipped = fast_module.GPU_TILES
        fast_module.GPU_TILES = variant_table(name, shipped)
        try:  # every class built while the table is patched; verbose: a tile that falls back is printed
            agent.set_backend(backend_name, strict=True, verbose=True)
            agent.backend_object.fast.build_all()
        finally:
            fast_module.GPU_TILES = shipped
        if name == TILES:
            info["tiles"] = TILE_OVERRIDES
    else:
        agent.set_backend(backend_name, strict=True, **options)
    backend = agent.backend_object
    info.update(options)
    if agent.backend != backend_name:
        raise RuntimeError(f"asked for backend {name!r}, the agent runs {agent.backend!r}")
    for attr in ("mode", "warmup_s", "cache_dir", "max_len"):
        if backend is not None and hasattr(backend, attr):
            info[attr] = getattr(backend, attr)
    fast = getattr(backend, "fast", None)
    if fast is not None:
        info["kernel_compile_s"] = round(getattr(fast, "compile_s", 0.0), 2)
    return info


def fast_plans(agent) -> list[str] | None:
    fast = getattr(agent.backend_object, "fast", None)
    slots = getattr(fast, "_slots", None)
    if slots is None:
        return None
    return [f"{'packed' if p.packed else 'dense'} {p.rows}x{p.length} M={p.tokens}" for p in slots]


# ---- report -------------------------------------------------------------------------------------

def device_tag(agent) -> str:
    if agent.device.type == "cuda":
        name = torch.cuda.get_device_name(agent.device).lower().replace("nvidia", "")
        return re.sub(r"[^a-z0-9]+", "_", name).strip("_") or "gpu"
    return agent.device.type


def machine(agent) -> dict:
    info = {"device": str(agent.device), "dtype": str(agent.dtype).replace("torch.", ""),
            "amp_enabled": agent.amp_enabled, "tilelang": package_version("tilelang"),
            "triton": package_version("triton"), "cuda_runtime": torch.version.cuda}
    if agent.device.type == "cuda":
        props = torch.cuda.get_device_properties(agent.device)
        info.update(gpu=torch.cuda.get_device_name(agent.device),
                    capability=list(torch.cuda.get_device_capability(agent.device)),
                    gpu_memory_gib=round(props.total_memory / 2**30, 1))
    else:
        from _env import cpu_model

        info["gpu"] = None
        info["cpu"] = cpu_model()
    return info


def ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else a / b


def fmt(value: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def goal_lines(report: dict) -> list[str]:
    res = report["results"]

    def p50(backend: str, case: str) -> float | None:
        return res.get(backend, {}).get("cases", {}).get(case, {}).get("p50_ms")

    def verdict(ok: bool | None) -> str:
        return "n/a " if ok is None else ("PASS" if ok else "FAIL")

    lines, goals = [], {}
    t = p50("tilelang", "a128")
    goals["a128_p50"] = None if t is None else t <= GOALS["a128_p50_ms"]
    lines.append(f"  {verdict(goals['a128_p50'])} tilelang a128 p50 {fmt(t, '.3f', ' ms')} "
                 f"<= {GOALS['a128_p50_ms']} ms")
    for case in ("a128", "a72"):
        for ref, key in (("eager", "speedup_vs_eager"), ("compile", "speedup_vs_compile")):
            r = ratio(p50(ref, case), t if case == "a128" else p50("tilelang", case))
            ok = None if r is None else r >= GOALS[key]
            goals[f"{case}_{key}"] = ok
            lines.append(f"  {verdict(ok)} tilelang {case} speed-up vs {ref} {fmt(r, '.2f', 'x')} >= {GOALS[key]:g}x")
    d = res.get("tilelang", {}).get("cases", {}).get("d", {}).get("tokens_per_s_p50")
    goals["d_tokens_per_s"] = None if d is None else d >= GOALS["d_tokens_per_s"]
    lines.append(f"  {verdict(goals['d_tokens_per_s'])} tilelang d {fmt(d and d / 1e3, '.0f', 'k')} real tokens/s "
                 f">= {GOALS['d_tokens_per_s'] / 1e3:.0f}k")
    report["goals"] = {"targets": GOALS, "met": goals}
    return lines


def ratio_table(report: dict) -> list[str]:
    res = report["results"]
    names = [n for n in report["backends"] if res.get(n, {}).get("available")]
    lines = []
    head = f"{'case':5s} {'what':32s} {'rows x L (real tok)':22s}" + "".join(f" {n + ' p50':>14s}" for n in names)
    head += f" {'tl/eager':>9s} {'tl/compile':>10s}"
    lines.append(head)
    lines.append("-" * len(head))
    for case in (c for c in CASES if c.key in report["inputs"]):
        shape = report["inputs"][case.key]
        desc = f"{shape['rows']} x {shape['padded_width']} ({shape['real_tokens']})"
        row = f"{case.key:5s} {case.title:32s} {desc:22s}"
        p = {n: res[n]["cases"].get(case.key, {}).get("p50_ms") for n in names}
        row += "".join(f" {fmt(p[n], '.3f', ' ms'):>14s}" for n in names)
        row += f" {fmt(ratio(p.get('eager'), p.get('tilelang')), '.2f', 'x'):>9s}"
        row += f" {fmt(ratio(p.get('compile'), p.get('tilelang')), '.2f', 'x'):>10s}"
        lines.append(row)
    if "d" not in report["inputs"]:
        return lines
    tps = {n: res[n]["cases"].get("d", {}).get("tokens_per_s_p50") for n in names}
    sps = {n: res[n]["cases"].get("d", {}).get("states_per_s_p50") for n in names}
    lines.append(f"{'d':5s} {'real tokens/s (p50 call)':32s} {'':22s}"
                 + "".join(f" {fmt(tps[n] and tps[n] / 1e3, '.1f', 'k'):>14s}" for n in names))
    lines.append(f"{'d':5s} {'states/s (p50 call)':32s} {'':22s}"
                 + "".join(f" {fmt(sps[n], '.1f'):>14s}" for n in names))
    return lines


def write_json(path: str, report: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(tmp, path)


# ---- main ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint directory (default: build --shape with "
                        "scripts/make_checkpoint.py into --checkpoint-dir)")
    parser.add_argument("--shape", default="large", choices=("tiny", "base", "large"))
    parser.add_argument("--checkpoint-dir", default=None, help="cache for built checkpoints (default "
                        "$LAYA_BENCH_CKPT or /tmp/laya-bench-ckpt; 'tmp' = a temporary directory)")
    parser.add_argument("--backends", default="eager,tilelang,compile",
                        help="comma-separated, run in this order (compile last: its warm-up is the longest); "
                        "tilelang-fp8 = tilelang with precision='fp8'")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"), help="16-bit dtype on CUDA "
                        "(LAYA_CUDA_AMP); the CPU runs fp32")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per single-state case (default 200)")
    parser.add_argument("--batch-repeats", type=int, default=None, help="timed calls for case d (default 10)")
    parser.add_argument("--warmup", type=int, default=None, help="warm-up calls per case (default 6; d: 3)")
    parser.add_argument("--case-budget-s", type=float, default=None,
                        help="stop timing a case after this many seconds (at least 3 calls; default 4)")
    parser.add_argument("--breakdown-calls", type=int, default=None,
                        help="instrumented calls per breakdown case (default 50; d: at most --batch-repeats)")
    parser.add_argument("--cases", default=",".join(c.key for c in CASES), help="subset of a72,a128,b,c,d")
    parser.add_argument("--tiles", default=None, help="backend tilelang-tiles: the table with these entries, a JSON "
                        "object (or a file holding one) {kind: {class index: tile}}, e.g. "
                        "'{\"attn_full\": {\"7\": {\"bm\": 128, \"bn\": 128, \"stages\": 2, \"threads\": 256}}}'")
    parser.add_argument("--json", default=None, help="default benchmarks/results/latency_<gpu-or-cpu>_<date>.json")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--quick", action="store_true", help="few repeats (a CPU dry run)")
    args = parser.parse_args(argv)

    quick = args.quick
    repeats = args.repeats or (5 if quick else 200)
    batch_repeats = args.batch_repeats or (2 if quick else 10)
    warmup = args.warmup if args.warmup is not None else (1 if quick else 6)
    batch_warmup = min(warmup, 3) if args.warmup is None and not quick else warmup
    budget = args.case_budget_s or (3.0 if quick else 4.0)
    breakdown_calls = args.breakdown_calls or (5 if quick else 50)
    backend_names = [b.strip() for b in args.backends.split(",") if b.strip()]
    if (TILES in backend_names) != (args.tiles is not None):
        parser.error(f"--tiles and the backend {TILES} go together")
    if args.tiles is not None:
        TILE_OVERRIDES.update(tile_entries(args.tiles))
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    cases = [c for c in CASES if c.key in wanted]
    if not cases:
        parser.error(f"--cases selects none of {', '.join(c.key for c in CASES)}")

    os.environ["LAYA_CUDA_AMP"] = args.dtype  # read by the agent's precision policy on CUDA
    import laya
    from laya import backends as backends_mod

    for name in backend_names:
        backends_mod.normalise(VARIANTS.get(name, (name,))[0])  # a typo fails here, before minutes of setup
    wall = time.perf_counter()

    def clock() -> str:
        return f"[{time.perf_counter() - wall:6.1f}s]"

    build_s = 0.0
    if args.model:
        model_dir = args.model
    else:
        cache = args.checkpoint_dir
        if cache == "tmp":
            cache = tempfile.mkdtemp(prefix="laya-bench-latency-")
        start = time.perf_counter()
        model_dir = bench_checkpoint(args.shape, cache)
        build_s = time.perf_counter() - start
        print(f"{clock()} checkpoint {model_dir} ({build_s:.1f} s to find or build)", flush=True)

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    start = time.perf_counter()
    agent = laya.load(model_dir, device=device)
    if agent.device.type == "cuda":
        torch.cuda.synchronize(agent.device)
    load_s = time.perf_counter() - start
    print(f"{clock()} loaded on {agent.device} ({machine(agent).get('gpu') or machine(agent).get('cpu')}), "
          f"dtype {agent.dtype}, in {load_s:.1f} s", flush=True)

    maker = StateMaker(agent)
    inputs = {c.key: build_inputs(agent, c, maker, args.seed) for c in cases}
    for c in cases:
        i = inputs[c.key]
        print(f"  {c.key:5s} {c.title:32s} rows {i['rows']:4d}  row length min/mean/max "
              f"{i['row_len_min']}/{i['row_len_mean']}/{i['row_len_max']}  real tokens {i['real_tokens']}", flush=True)

    max_len, head_max_len = limits(agent)
    out = args.json or os.path.join(REPO_ROOT, "benchmarks", "results",
                                    f"latency_{device_tag(agent)}_{dt.date.today().isoformat()}.json")
    report: dict = {
        "benchmark": "latency", "issue": 5, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "model": model_dir, "shape": None if args.model else args.shape, "checkpoint_build_s": round(build_s, 1),
        "load_s": round(load_s, 2), "max_len": max_len, "head_max_len": head_max_len,
        "requested_dtype": args.dtype, "machine": machine(agent), "env": environment(),
        "settings": {"repeats": repeats, "batch_repeats": batch_repeats, "warmup": warmup,
                     "batch_warmup": batch_warmup, "case_budget_s": budget, "breakdown_calls": breakdown_calls,
                     "seed": args.seed, "quick": quick,
                     "timing": "wall time per public predict/predict_batch call, torch.cuda.synchronize() before and "
                               "after each call; p50/p90 over the timed calls after the warm-up calls"},
        "encoder": {k: getattr(agent.model.encoder.config, k, None) for k in
                    ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "local_attention", "global_attn_every_n_layers", "vocab_size")},
        "questions": TICKET_QUESTIONS,
        "cases": {c.key: {"title": c.title, "states": c.states, "questions": c.questions,
                          "target_tokens": c.target, "call": "predict_batch" if c.batch else "predict"} for c in cases},
        "inputs": {k: {kk: vv for kk, vv in v.items() if kk not in ("states", "questions")} for k, v in inputs.items()},
        "backends": backend_names, "results": {}, "agreement": {},
    }
    answers: dict[str, dict] = {}

    for name in backend_names:
        rec: dict = {"available": False}
        report["results"][name] = rec
        print(f"{clock()} backend {name}: installing ...", flush=True)
        if agent.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(agent.device)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                rec["install"] = install(agent, name)
        except Exception as e:  # noqa: BLE001 - reported, and the run goes on with the next backend
            rec["error"] = f"{type(e).__name__}: {e}"
            print(f"{clock()} backend {name}: UNAVAILABLE ({rec['error'].splitlines()[0][:300]})", flush=True)
            write_json(out, report)
            continue
        rec["available"] = True
        rec["setup_s"] = round(time.perf_counter() - start, 2)
        print(f"{clock()} backend {name}: installed in {rec['setup_s']:.1f} s", flush=True)
        rec["cases"], answers[name] = {}, {}
        for c in cases:
            try:
                stats, first = time_case(agent, c, inputs[c.key], batch_warmup if c.batch else warmup,
                                         batch_repeats if c.batch else repeats, budget)
            except Exception as e:  # noqa: BLE001
                rec["cases"][c.key] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
                print(f"{clock()}   {name:8s} {c.key:5s} ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rec["cases"][c.key] = stats
            answers[name][c.key] = first
            extra = (f"  {stats['tokens_per_s_p50'] / 1e3:.1f}k real tok/s  {stats['states_per_s_p50']:.1f} states/s"
                     if c.batch else "")
            print(f"{clock()}   {name:8s} {c.key:5s} p50 {stats['p50_ms']:9.3f} ms  p90 {stats['p90_ms']:9.3f} ms  "
                  f"n={stats['n']:4d}  warm-up {stats['warmup_s']:.1f} s{extra}", flush=True)
        for case in (c for c in CASES if c.key in BREAKDOWN_CASES and c.key in answers[name]):
            key = f"breakdown_{case.key}"
            try:
                calls = min(breakdown_calls, batch_repeats) if case.batch else breakdown_calls
                rec[key] = breakdown(agent, case, inputs[case.key], calls)
                print_breakdown(name, case.key, rec[key])
            except Exception as e:  # noqa: BLE001
                rec[key] = {"error": f"{type(e).__name__}: {e}"}
                print(f"  stage breakdown ({name}, {case.key}) failed: {type(e).__name__}: {e}", flush=True)
        rec["plans"] = fast_plans(agent)
        if agent.device.type == "cuda":
            rec["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(agent.device) / 2**30, 2)
        ref = "eager" if "eager" in answers else next(iter(answers))
        if name != ref:
            report["agreement"][name] = {"reference": ref, **{
                key: compare(answers[ref][key], answers[name][key])
                for key in answers[name] if key in answers[ref]}}
        report["elapsed_s"] = round(time.perf_counter() - wall, 1)
        write_json(out, report)

    agent.deaccelerate()
    print()
    if report["agreement"]:
        print("answers vs reference (top answer per question; clear = reference margin >= "
              f"{CLEAR_MARGIN}; max |dp| over probabilities, max |d act|):")
        for name, per_case in report["agreement"].items():
            ref = per_case["reference"]
            for key, a in per_case.items():
                if key == "reference":
                    continue
                print(f"  {name:8s} vs {ref:6s} {key:5s} {a['answers']:4d} answers  disagree {a['disagree']}"
                      f" (clear {a['disagree_clear']})  max|dp| {a['max_dp']:.4f}  max|d act| {a['max_d_act']:.4f}")
    for name in backend_names:
        rec = report["results"][name]
        if not rec.get("available"):
            print(f"{name}: unavailable: {rec.get('error', '?').splitlines()[0][:300]}")
    for name in ["tilelang"] + [n for n in backend_names if n != "tilelang"]:
        for case in BREAKDOWN_CASES:
            b = report["results"].get(name, {}).get(f"breakdown_{case}")
            if b and "median_ms" in b:
                print_breakdown(name, case, b)
    goals = goal_lines(report)
    report["elapsed_s"] = round(time.perf_counter() - wall, 1)
    write_json(out, report)
    print(f"\nwrote {out}")
    m = report["machine"]
    print(f"\n{m.get('gpu') or m.get('cpu')}, {m['dtype']}, torch {torch.__version__}, "
          f"tilelang {m['tilelang']}, {report['elapsed_s']:.0f} s in all")
    print("goals (issue 5):")
    for line in goals:
        print(line)
    for line in ratio_table(report):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
