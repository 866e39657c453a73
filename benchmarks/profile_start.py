"""Fresh-process start of a CUDA backend (tilelang by default): where the seconds go (cProfile top entries).

    HF_HUB_OFFLINE=1 PYTHONPATH=$PWD python benchmarks/profile_start.py CHECKPOINT_DIR [BACKEND] [--no-answer]

BACKEND defaults to tilelang; --no-answer stops at the ready agent (with LAYA_COMPILE_WARMUP=0 and
BACKEND=compile: the start without any compiling).

Prints import / agent-ready / first-answer seconds (inflated by the profiler) and the top cumulative entries;
run it twice to see the empty and the warm TileLang cache. Results: start_profile_h200_2026-12-02.json.
"""
import cProfile, pstats, sys, time, io
t0 = time.perf_counter()
pr = cProfile.Profile(); pr.enable()
import laya
t_import = time.perf_counter() - t0
args = [a for a in sys.argv[1:] if a != "--no-answer"]
agent = laya.Agent(args[0], device="cuda", backend=args[1] if len(args) > 1 else "tilelang")
t_agent = time.perf_counter() - t0
if "--no-answer" not in sys.argv:
    agent.predict("I was charged twice for my order, please refund me today", laya.triage_questions())
t_first = time.perf_counter() - t0
pr.disable()
answered = "" if "--no-answer" in sys.argv else f", first answer {t_first:.2f} s"
print(f"import {t_import:.2f} s, agent ready {t_agent:.2f} s{answered}, backend {agent.backend}")
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(45); print(s.getvalue()[:9000])
s = io.StringIO(); st = pstats.Stats(pr, stream=s); st.sort_stats("cumulative").print_callers("_register_to_dispatcher|builtins.compile")
print(s.getvalue()[:6000])
