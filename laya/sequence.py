"""Token rows and collation: one row per (state, question), right-padded into one batch.

Row layout (the published one): [CLS] "<type> question: <instructions>" [SEP]
then for each option slot `[MASK] " <option text>"`, then [SEP], the state tokens, [SEP].
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from .questions import Question

OPTION_TOKEN_CAP = 48  # tokens of one option text before its [MASK] is prepended
MIN_INSTRUCTION_BUDGET = 16  # below this many free head tokens, option spans are squeezed
MIN_TOKENS_PER_OPTION = 4
MIN_INSTRUCTION_TOKENS = 8
DEFAULT_HEAD_MAX_LEN = 192

# Shared fast tokenizers are not re-entrant ("Already borrowed"): every encode goes through this.
TOKENIZER_LOCK = threading.RLock()

_head_cache: contextvars.ContextVar[dict | None] = contextvars.ContextVar("laya_head_cache", default=None)


@contextlib.contextmanager
def question_cache() -> Iterator[None]:
    """Scope a cache of question heads to one predict call (identical heads across states)."""
    token = _head_cache.set({})
    try:
        yield
    finally:
        _head_cache.reset(token)


_plain_backends: dict[int, Any] = {}


def _plain_backend(tok: Any) -> Any:
    """The tokenizer's Rust backend without the padding/truncation its tokenizer.json may carry.

    transformers switches those off for each `tok(text)` call; a bare `backend.encode` would apply them
    (e.g. pad every text to 128 tokens), so a private copy with both disabled is cached per tokenizer.
    """
    plain = _plain_backends.get(id(tok))
    if plain is None or plain[0] is not tok:
        from tokenizers import Tokenizer

        backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
        backend.no_padding()
        backend.no_truncation()
        plain = _plain_backends[id(tok)] = (tok, backend)
    return plain[1]


def encode(tok: Any, text: str) -> list[int]:
    """Token ids of `text` without special tokens: the same ids as `tok(text, add_special_tokens=False)`,
    from the Rust backend directly when there is one (less per-call overhead)."""
    with TOKENIZER_LOCK:
        if getattr(tok, "backend_tokenizer", None) is not None:
            return _plain_backend(tok).encode(text, add_special_tokens=False).ids
        return tok(text, add_special_tokens=False)["input_ids"]


def scrub_mask(tok: Any, text: str) -> str:
    """The mask token marks options; any literal copy of it in user text becomes a space."""
    mask = tok.mask_token
    return text.replace(mask, " ") if mask and mask in text else text


@dataclass(frozen=True)
class Head:
    ids: tuple[int, ...]
    markers: tuple[int, ...]  # index of each slot's [MASK] inside `ids`
    tokens_per_option: int | None  # set when the option spans were squeezed
    distinct: int  # distinct option spans after capping


def build_head(tok: Any, q: Question, head_max_len: int) -> Head:
    """The question part of a row, with the published 48-token cap and budget squeeze."""
    cache = _head_cache.get()
    key = (id(tok), q, head_max_len)
    if cache is not None and key in cache:
        return cache[key]
    ins_ids = encode(tok, scrub_mask(tok, f"{q.qtype} question: {q.instructions}"))
    spans = [[tok.mask_token_id] + encode(tok, scrub_mask(tok, " " + text))[:OPTION_TOKEN_CAP]
             for text in q.slot_texts()]
    budget = head_max_len - sum(len(s) for s in spans)
    per = None
    if budget < MIN_INSTRUCTION_BUDGET:
        per = max(MIN_TOKENS_PER_OPTION, (head_max_len - MIN_INSTRUCTION_BUDGET) // len(spans))
        spans = [s[:per] for s in spans]
        budget = head_max_len - sum(len(s) for s in spans)
    ins_ids = ins_ids[:max(MIN_INSTRUCTION_TOKENS, budget)]
    ids = [tok.cls_token_id, *ins_ids, tok.sep_token_id]
    markers = []
    for span in spans:
        markers.append(len(ids))
        ids.extend(span)
    ids.append(tok.sep_token_id)
    head = Head(tuple(ids), tuple(markers), per, len({tuple(s) for s in spans}))
    if cache is not None:
        cache[key] = head
    return head


def state_room(tok: Any, q: Question, max_len: int, head_max_len: int) -> int:
    """How many state tokens fit in this question's row."""
    return max(0, max_len - len(build_head(tok, q, head_max_len).ids) - 1)


@dataclass
class Row:
    ids: list[int]
    markers: list[int]
    qtype: int
    state_tokens_used: int
    state_tokens_dropped: int
    head: Head = field(repr=False)


def build_row(tok: Any, q: Question, state_ids: list[int], keep_tail: bool,
              max_len: int, head_max_len: int) -> Row:
    """Head + as much state as fits + [SEP], clipped to max_len; refuses rows that lose markers."""
    head = build_head(tok, q, head_max_len)
    room = max(0, max_len - len(head.ids) - 1)
    if len(state_ids) <= room:
        part = state_ids
    else:
        part = state_ids[len(state_ids) - room:] if keep_tail else state_ids[:room]
    ids = [*head.ids, *part, tok.sep_token_id][:max_len]
    markers = [m for m in head.markers if m < max_len]
    if len(markers) < q.k:
        raise ValueError(
            f"question '{q.qid}': only {len(markers)} of its {q.k} option markers fit in max_len={max_len} "
            f"with head_max_len={head_max_len}; lower head_max_len, raise max_len, or use fewer options")
    used = min(len(part), max(0, max_len - len(head.ids)))
    return Row(ids, markers, q.qtype_id, used, len(state_ids) - used, head)


@dataclass
class Batch:
    """Collated tensors (the backend contract) plus the per-row bookkeeping decoding needs."""

    input_ids: torch.Tensor  # [N, L] int64, pad id on the right
    attention_mask: torch.Tensor  # [N, L] int64 0/1
    marker_pos: torch.Tensor  # [N, K] int64, 0 where unused
    marker_mask: torch.Tensor  # [N, K] bool
    qtype: torch.Tensor  # [N] int64
    rows: list[Row]

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.input_ids, self.attention_mask, self.marker_pos, self.marker_mask, self.qtype


def collate(rows: list[Row], pad_id: int) -> Batch:
    """Right-pad rows into one batch (rows in (state, question) order)."""
    width = max(len(r.ids) for r in rows)
    k = max(len(r.markers) for r in rows)
    # One tensor() call per field: padded Python lists are much cheaper than per-row slicing.
    input_ids = torch.tensor([r.ids + [pad_id] * (width - len(r.ids)) for r in rows], dtype=torch.long)
    attention_mask = torch.tensor([[1] * len(r.ids) + [0] * (width - len(r.ids)) for r in rows], dtype=torch.long)
    marker_pos = torch.tensor([r.markers + [0] * (k - len(r.markers)) for r in rows], dtype=torch.long)
    marker_mask = torch.tensor([[True] * len(r.markers) + [False] * (k - len(r.markers)) for r in rows])
    qtype = torch.tensor([r.qtype for r in rows], dtype=torch.long)
    return Batch(input_ids, attention_mask, marker_pos, marker_mask, qtype, rows)


def pad_tokens_to(tensors: tuple, multiple: int, pad_id: int) -> tuple:
    """Right-pad the token axis of (ids, mask, ...) to a multiple (pad ids, mask 0); the rest unchanged."""
    ids, mask, *rest = tensors
    extra = -ids.shape[1] % multiple
    if not extra:
        return tensors
    ids = torch.nn.functional.pad(ids, (0, extra), value=pad_id)
    mask = torch.nn.functional.pad(mask, (0, extra), value=0)
    return (ids, mask, *rest)
