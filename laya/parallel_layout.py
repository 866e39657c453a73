"""The parallel option layout (spec 3.9, config `option_layout: "parallel"`; eager backend only).

The token row is the sequential one (laya.sequence); only positions and attention change:
- every option span starts at the same position id, the one after the instruction's [SEP];
- the closing [SEP], the state and the final [SEP] continue after the longest span;
- `option_ids` is 0 for shared tokens and j + 1 for the tokens of the row's j-th option span;
- a token may attend to every real token except the tokens of a *different* option; sliding-window
  layers additionally need |position_i - position_j| <= sliding_window (positions, not indices).

So each option is read as if it were the only one, and the answer does not depend on option order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LAYOUTS = ("sequential", "parallel")


def row_positions(length: int, head_len: int, markers: Any) -> tuple[np.ndarray, np.ndarray]:
    """(position_ids, option_ids), int64 [length], of a row whose first `head_len` tokens are its head
    ([CLS] instruction [SEP], the option spans starting at `markers`, the closing [SEP])."""
    index = np.arange(length, dtype=np.int64)
    positions, options = index.copy(), np.zeros(length, dtype=np.int64)
    markers = [int(m) for m in markers]
    if not markers:
        return positions, options
    close = head_len - 1  # the head's closing [SEP]
    start = markers[0]  # position of every span's [MASK]
    ends = markers[1:] + [close]
    longest = max(end - m for m, end in zip(markers, ends))
    for j, (m, end) in enumerate(zip(markers, ends)):
        span = slice(m, min(end, length))
        positions[span] = start + index[span] - m
        options[span] = j + 1
    tail = index >= close
    positions[tail] = start + longest + index[tail] - close
    return positions, options


def parallel_masks(attention_mask: Any, position_ids: Any, option_ids: Any, sliding_window: int | None) -> dict:
    """ModernBERT's per-layer-type masks {"full_attention", "sliding_attention"}: [N, 1, L, L] bool,
    True = may attend. Pad keys are masked; pad queries keep the real keys (no all-masked row).
    Arguments are [N, L] torch tensors."""
    import torch  # only the model calls this; importing the module stays torch-free

    # Built in place from 16-bit ids: the [N, L, L] intermediates are what a big batch pays for (int64
    # temporaries cost ~8x the masks themselves).
    options = option_ids.to(torch.int16)
    mine, theirs = options[:, :, None], options[:, None, :]
    full = mine == theirs  # [N, L, L]
    full |= mine == 0
    full |= theirs == 0
    full &= attention_mask.bool()[:, None, :]
    masks = {"full_attention": full[:, None]}
    if sliding_window is None:
        masks["sliding_attention"] = masks["full_attention"]
        return masks
    positions = position_ids.to(options.dtype)  # positions < max_len <= 8192: differences fit in 16 bits
    sliding = (positions[:, :, None] - positions[:, None, :]).abs_() <= sliding_window
    sliding &= full
    masks["sliding_attention"] = sliding[:, None]
    return masks


def call_model(model: Any, tensors: tuple) -> Any:
    """`model` on collated tensors: Batch.tensors(), then the parallel layout's position and option ids
    when the batch has them (passed by name, as DecisionModel.forward takes them)."""
    if len(tensors) > 5:
        return model(*tensors[:5], position_ids=tensors[5], option_ids=tensors[6])
    return model(*tensors)


def check_layout(layout: Any, where: str) -> str:
    """The config's option_layout (default sequential); parallel needs transformers >= 5 (dict masks)."""
    layout = "sequential" if layout is None else layout
    if layout not in LAYOUTS:
        raise ValueError(f"option_layout {layout!r} in {where} is not supported; use 'sequential' or 'parallel'")
    if layout == "parallel":
        import transformers

        if int(transformers.__version__.split(".")[0]) < 5:
            raise RuntimeError(f"option_layout 'parallel' ({where}) needs transformers >= 5 (per-layer attention "
                               f"masks); this environment has {transformers.__version__}: upgrade transformers")
    return layout


def eager_only(layout: Any, what: str, hint: str = " (or use backend='eager')") -> None:
    """Refuse `what` for a config/model whose option_layout is "parallel": only the eager forward runs it
    (its masks are rows x L x L, its positions per row)."""
    if layout == "parallel":
        raise ValueError(f"this checkpoint uses option_layout 'parallel', which only the eager backend runs; "
                         f"{what} needs a checkpoint with the sequential layout{hint}")


def require_modernbert(config: Any, where: str = "") -> None:
    """The parallel layout's per-layer masks and position ids are ModernBERT's encoder interface."""
    model_type = getattr(config, "model_type", None)
    if model_type != "modernbert":
        raise ValueError(f"the parallel option layout{where} needs a ModernBERT encoder, this one is {model_type!r}; "
                         "use option_layout 'sequential'")
