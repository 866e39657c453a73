"""TrainConfig: every knob of a fine-tuning run, its defaults and its checks; the update budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..parallel_layout import LAYOUTS
from ..questions import QTYPES

LOSSES = ("soft-ce", "rlcd")
POSITIVE_FIELDS = ("epochs", "micro_batch", "grad_accum", "rl_samples", "calib_max", "max_len", "head_max_len",
                   "max_steps", "save_every", "calib_min_bucket_n", "min_abstain_n")
INTEGER_FIELDS = POSITIVE_FIELDS[1:]  # counts; epochs may be fractional
NON_NEGATIVE_FIELDS = ("encoder_lr", "head_lr", "min_lr", "warmup_frac", "weight_decay", "grad_clip", "rl_weight",
                       "sigma_start", "sigma_end", "w_sph", "w_rps", "freeze_layers", "label_smoothing")
MIN_UPDATES = 50  # fewer optimiser updates than this rarely move a fresh head off the uniform answer


@dataclass
class TrainConfig:
    epochs: float = 4
    micro_batch: int = 8
    grad_accum: int = 8
    encoder_lr: float = 2.5e-5
    head_lr: float = 1e-4
    min_lr: float = 1e-6
    warmup_frac: float = 0.05
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    loss: str = "rlcd"  # or "soft-ce"
    rl_samples: int = 4
    rl_weight: float = 1.0  # weight of the RLCD policy-gradient term (the soft CE always has weight 1)
    sigma_start: float = 0.4
    sigma_end: float = 0.1
    w_sph: float = 0.75
    w_rps: float = 1.0
    calib_max: int = 400
    calib_frac: float = 0.1
    calib_seed: int = 20260922
    calib_min_bucket_n: int = 2000
    seed: int = 0
    # question types whose option order is drawn at random per epoch: a tuple of type names, () for none;
    # True (the laya-train flag) means every type
    shuffle_options: tuple | bool = ()
    freeze_encoder: bool = False
    freeze_embeddings: bool = False
    freeze_layers: int = 0  # lowest encoder layers kept frozen (BERT/ModernBERT layer lists)
    # Dropout while training, encoder and head (None: keep the model's own, 0.1 for BERT and the head).
    # The option markers of a fresh head differ by a few per cent of their norm at the start; dropout
    # noise of 0.1 is larger than that signal and keeps the model at the uniform answer.
    dropout: float | None = 0.0
    # Batches are shuffled, then sorted by length inside windows of this many batches: small windows
    # keep question types and option counts mixed within a batch (one type per batch is a noisy step).
    length_window: int = 4
    # Build the (option-shuffled) token rows once and reuse them every epoch instead of re-shuffling and
    # re-tokenising per epoch: for large generated data, where building rows would starve a GPU.
    fixed_rows: bool = False
    build_workers: int = 0  # processes that build token rows (0: in this process)
    device: str = "auto"  # "auto": CUDA when available, else the CPU
    amp: str | None = None  # "bf16" or "off"; None or "auto": bf16 autocast on CUDA, off on the CPU
    gradient_checkpointing: bool | None = None  # None: off (saves memory on long rows when True)
    head_layers: int = 2  # decision-head layers for a fresh head (a laya checkpoint base keeps its own)
    # "sequential" or "parallel" (spec 3.9; parallel needs a ModernBERT encoder and transformers >= 5); None
    # keeps the base checkpoint's layout ("sequential" for a fresh encoder). Saved in the checkpoint's config.
    option_layout: str | None = None
    max_len: int | None = None  # None: the base checkpoint's value (256 for a fresh encoder)
    head_max_len: int | None = None
    max_steps: int | None = None  # optimiser steps; None = epochs decide
    time_budget_s: float | None = None  # stop (and still calibrate and save) after this long
    save_every: int = 50  # optimiser steps between trainer-state saves
    target_error: float = 0.10
    min_abstain_n: int = 10
    keep_state: bool = False
    progress: bool = True
    log_every: int = 100  # also print one plain line every this many steps to stderr (0: none)
    label_smoothing: float = 0.0  # expected-answer targets: this much mass spread over all options
    # text+label data (CSV/JSONL): the columns, the question id and its instructions
    text_column: str = "text"
    label_column: str = "label"
    question_id: str = "label"
    instructions: str | None = None
    eval_data: str | None = None  # held-out file for calibration (default: a slice of the training data)
    extra: dict = field(default_factory=dict)  # free-form notes copied into the metadata

    def validate(self) -> "TrainConfig":
        """ValueError naming the first bad field (loss, shuffle types, layout, counts, calib_frac)."""
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        shuffle_types(self)
        if self.option_layout is not None and self.option_layout not in LAYOUTS:
            raise ValueError(f"option_layout {self.option_layout!r} in the training config is not supported; use "
                             "'sequential' or 'parallel'")
        for name in POSITIVE_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name in INTEGER_FIELDS and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        for name in NON_NEGATIVE_FIELDS:  # (NaN, inf and negative rates or weights train on nonsense)
            value = getattr(self, name, 0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not self.label_smoothing < 1.0:  # (>= 0 checked above) all the mass off the answer teaches nothing
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        if isinstance(self.target_error, bool) or not isinstance(self.target_error, (int, float)) or \
                not 0.0 <= self.target_error <= 1.0:
            raise ValueError(f"target_error must be in [0.0, 1.0], got {self.target_error!r}")
        frac = self.calib_frac
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0.0 <= frac < 1.0:
            raise ValueError(f"calib_frac must be in [0, 1), got {frac!r}")
        return self


def shuffle_types(config: Any) -> tuple[str, ...]:
    """The question types whose options are shuffled: True = all, False/None/() = none, else the names."""
    value = config.shuffle_options
    if value is True:
        return tuple(QTYPES)
    if not value:
        return ()
    names = (value,) if isinstance(value, str) else tuple(value)
    unknown = [n for n in names if n not in QTYPES]
    if unknown:
        raise ValueError(f"shuffle_options names unknown question types {unknown}; use some of {list(QTYPES)}")
    return names


def optimizer_updates(n_items: int, micro_batch: int, grad_accum: int, epochs: float) -> int:
    """Optimiser steps a run takes: ceil(items / effective batch) per epoch, times epochs (at least 1)."""
    per_epoch = math.ceil(n_items / (micro_batch * grad_accum))
    return max(1, int(math.ceil(per_epoch * epochs)))


def update_budget_message(n_train: int, config: TrainConfig) -> str | None:
    """A warning text when the data and batch sizes leave too few optimiser updates, else None."""
    updates = config.max_steps or optimizer_updates(n_train, config.micro_batch, config.grad_accum, config.epochs)
    if updates >= MIN_UPDATES:
        return None
    return (f"only {updates} optimizer updates ({n_train} training items, effective batch "
            f"{config.micro_batch * config.grad_accum}, {config.epochs:g} epochs); fewer than {MIN_UPDATES} rarely "
            "train a useful head: lower --micro-batch/--grad-accum, raise --epochs or add data")
