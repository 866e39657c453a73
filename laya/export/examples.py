"""Synthetic forward inputs for tracing and verifying exported graphs.

They look like real collated batches on purpose: right padding of different lengths per row, a marker
slot that is masked off, and mixed question types. A trace or check on uniform inputs would miss the
very branches (padding masks, masked markers, per-type embeddings) that real requests take.
"""

from __future__ import annotations

import torch

FIRST_ID = 5  # skip the low ids most vocabularies reserve for special tokens


def example_inputs(batch: int, seq_len: int, num_markers: int, vocab_size: int = 1000, seed: int = 0,
                   pad_id: int = 0) -> tuple[torch.Tensor, ...]:
    """(input_ids, attention_mask, marker_pos, marker_mask, qtype) for one synthetic batch.

    Row i keeps `seq_len - 3 * i` tokens (at least num_markers + 2), its markers at 1..num_markers;
    the last row of a batch with several marker slots has its final slot masked off (position 0).
    """
    if batch < 1 or num_markers < 1 or seq_len < num_markers + 2:
        raise ValueError(f"example_inputs needs batch >= 1, num_markers >= 1 and seq_len >= num_markers + 2, "
                         f"got batch={batch}, seq_len={seq_len}, num_markers={num_markers}")
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_ID, max(FIRST_ID + 1, vocab_size), (batch, seq_len), generator=gen)
    mask = torch.zeros(batch, seq_len, dtype=torch.long)
    for i in range(batch):
        valid = max(num_markers + 2, seq_len - 3 * i)
        mask[i, :valid] = 1
        ids[i, valid:] = pad_id
    marker_pos = torch.arange(1, num_markers + 1).repeat(batch, 1)
    marker_mask = torch.ones(batch, num_markers, dtype=torch.bool)
    if num_markers > 1:
        marker_pos[-1, -1] = 0
        marker_mask[-1, -1] = False
    qtype = torch.arange(batch) % 3
    return ids, mask, marker_pos, marker_mask, qtype
