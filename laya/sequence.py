"""Token rows and collation: one row per (state, question), right-padded into one batch.

Row layout (the published one): [CLS] "<type> question: <instructions>" [SEP]
then for each option slot `[MASK] " <option text>"`, then [SEP], the state tokens, [SEP].
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bytebpe import AsciiByteBPE
from .questions import QTYPES, Question
from .wordpiece import AsciiWordPiece

OPTION_TOKEN_CAP = 48  # tokens of one option text before its [MASK] is prepended
MIN_INSTRUCTION_BUDGET = 16  # below this many free head tokens, option spans are squeezed
MIN_TOKENS_PER_OPTION = 4
MIN_INSTRUCTION_TOKENS = 8
DEFAULT_MAX_LEN = 512  # tokens of one row when the checkpoint config names none
DEFAULT_HEAD_MAX_LEN = 192
HEAD_CACHE_SIZE = 4096  # question heads kept per tokenizer (agents ask the same questions again and again)

# Shared fast tokenizers are not re-entrant ("Already borrowed"): every encode goes through this.
TOKENIZER_LOCK = threading.RLock()


class TokenizerView:
    """What rows need from a tokenizer, read once: special ids, a plain Rust backend, a head cache.

    transformers' special-token properties go through a slow `__getattr__`; `tok(text)` switches off the
    padding/truncation a tokenizer.json may carry, which a bare `backend.encode` would apply (e.g. pad
    every text to 128 tokens), so the view keeps a private backend copy with both disabled.
    """

    def __init__(self, tok: Any):
        self.cls_id, self.sep_id, self.pad_id = tok.cls_token_id, tok.sep_token_id, tok.pad_token_id
        self.mask_id, self.mask_token = tok.mask_token_id, tok.mask_token
        self.backend = None
        self.ascii: AsciiWordPiece | AsciiByteBPE | None = None
        if getattr(tok, "backend_tokenizer", None) is not None:
            from tokenizers import Tokenizer

            self.backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
            self.backend.no_padding()
            self.backend.no_truncation()
            # BERT WordPiece and GPT-2-style byte-level BPE tokenizers: plain-ASCII texts get the same ids
            # from Python, several times faster than through Rust
            self.ascii = AsciiWordPiece.for_backend(self.backend) or AsciiByteBPE.for_backend(self.backend)
        self.tok = weakref.ref(tok)
        self.heads: OrderedDict = OrderedDict()  # (question, head_max_len) -> Head, least recent first
        self.head_sets: dict = {}  # (question-set key, head_max_len) -> tuple of Heads (insertion order = age)


def config_max_len(cfg: dict) -> int:
    """The checkpoint config's row length (max_len), DEFAULT_MAX_LEN when it names none."""
    return int(cfg.get("max_len", DEFAULT_MAX_LEN))


def config_head_max_len(cfg: dict) -> int:
    """The checkpoint config's question-head budget (head_max_len), DEFAULT_HEAD_MAX_LEN when it names none."""
    return int(cfg.get("head_max_len", DEFAULT_HEAD_MAX_LEN))


_views: "weakref.WeakKeyDictionary[Any, TokenizerView]" = weakref.WeakKeyDictionary()


def tokenizer_view(tok: Any) -> TokenizerView:
    """The view of `tok`, made once per tokenizer (it refers to the tokenizer weakly: nothing kept alive)."""
    view = _views.get(tok)
    if view is None:
        with TOKENIZER_LOCK:
            view = _views.get(tok)
            if view is None:
                view = _views[tok] = TokenizerView(tok)
    return view


def encode(tok: Any, text: str) -> list[int]:
    """Token ids of `text` without special tokens: the same ids as `tok(text, add_special_tokens=False)`."""
    return encode_many(tok, [text])[0]


def encode_many(tok: Any, texts: list[str]) -> list[list[int]]:
    """`encode` for several texts: plain-ASCII texts of a BERT WordPiece or byte-level BPE tokenizer in Python
    (laya.wordpiece, laya.bytebpe: same ids), the rest in one call to the Rust backend when there is one
    (`encode_batch_fast`: no offsets computed, cheaper than `tok(...)` and than the single-text `encode`,
    which converts offsets to characters, even for one text)."""
    return encode_view(tok, tokenizer_view(tok), texts)


def encode_view(tok: Any, view: TokenizerView, texts: list[str]) -> list[list[int]]:
    """`encode_many` with the tokenizer's view at hand (the request path has it already)."""
    ascii_wp = view.ascii
    if ascii_wp is not None:  # pure Python; its caches are dicts (single operations, GIL-atomic): no lock
        out = [ascii_wp.encode(t) for t in texts]
        if None not in out:
            return out  # type: ignore[return-value]
        rest = iter(rust_encode(tok, view, [t for t, ids in zip(texts, out) if ids is None]))
        return [next(rest) if ids is None else ids for ids in out]
    return rust_encode(tok, view, texts)


def rust_encode(tok: Any, view: TokenizerView, texts: list[str]) -> list[list[int]]:
    with TOKENIZER_LOCK:
        if view.backend is not None:
            fast = getattr(view.backend, "encode_batch_fast", view.backend.encode_batch)
            return [e.ids for e in fast(texts, add_special_tokens=False)]
        return [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def scrub_mask(tok: Any, text: str) -> str:
    """The mask token marks options; any literal copy of it in user text becomes a space."""
    mask = tokenizer_view(tok).mask_token
    return text.replace(mask, " ") if mask and mask in text else text


@dataclass(frozen=True)
class Head:
    ids: tuple[int, ...]
    markers: tuple[int, ...]  # index of each slot's [MASK] inside `ids`
    tokens_per_option: int | None  # set when the option spans were squeezed
    distinct: int  # distinct option spans after capping
    # `ids` as int64 bytes (build_head fills them): collate copies these instead of converting the same
    # Python ints again for every row
    id_bytes: bytes | None = field(default=None, compare=False, repr=False)
    # `markers` as int64 bytes, likewise (a row whose markers all fit has exactly these)
    marker_bytes: bytes | None = field(default=None, compare=False, repr=False)


def build_head(tok: Any, q: Question, head_max_len: int) -> Head:
    """The question part of a row, with the published 48-token cap and budget squeeze (cached)."""
    view = tokenizer_view(tok)
    key = (q, head_max_len)
    with TOKENIZER_LOCK:
        head = view.heads.get(key)
        if head is not None:
            view.heads.move_to_end(key)
            return head
    texts = [f"{q.qtype} question: {q.instructions}", *(" " + t for t in q.slot_texts())]
    ins_ids, *option_ids = encode_many(tok, [scrub_mask(tok, t) for t in texts])
    spans = [[view.mask_id] + ids[:OPTION_TOKEN_CAP] for ids in option_ids]
    budget = head_max_len - sum(len(s) for s in spans)
    per = None
    if budget < MIN_INSTRUCTION_BUDGET:
        per = max(MIN_TOKENS_PER_OPTION, (head_max_len - MIN_INSTRUCTION_BUDGET) // len(spans))
        spans = [s[:per] for s in spans]
        budget = head_max_len - sum(len(s) for s in spans)
    ins_ids = ins_ids[:max(MIN_INSTRUCTION_TOKENS, budget)]
    ids = [view.cls_id, *ins_ids, view.sep_id]
    markers = []
    for span in spans:
        markers.append(len(ids))
        ids.extend(span)
    ids.append(view.sep_id)
    head = Head(tuple(ids), tuple(markers), per, len({tuple(s) for s in spans}), int64_bytes(ids),
                int64_bytes(markers))
    with TOKENIZER_LOCK:
        view.heads[key] = head
        while len(view.heads) > HEAD_CACHE_SIZE:
            view.heads.popitem(last=False)
    return head


def build_heads(tok: Any, qs: Any, head_max_len: int, key: bytes | None = None) -> tuple[Head, ...]:
    """`build_head` for each question. With `key` -- bytes that determine the questions' content in full
    (laya.pipeline's marshal key of the question dict) -- the tuple is remembered per tokenizer and
    head_max_len: one lookup per call instead of hashing and comparing every question."""
    if key is None:
        return tuple(build_head(tok, q, head_max_len) for q in qs)
    view = tokenizer_view(tok)
    heads = view.head_sets.get((key, head_max_len))
    if heads is None:
        heads = tuple(build_head(tok, q, head_max_len) for q in qs)
        with TOKENIZER_LOCK:
            view.head_sets[(key, head_max_len)] = heads
            while len(view.head_sets) > HEAD_CACHE_SIZE:
                del view.head_sets[next(iter(view.head_sets))]
    return heads


def int64_bytes(values: Any) -> bytes:
    """Integers as native int64 bytes, an int64 array's memory (struct.pack: about twice as fast as np.array
    or array('q') on a list of Python ints)."""
    return struct.pack(f"{len(values)}q", *values)


_ONE, _ZERO = int64_bytes([1]), int64_bytes([0])
_pack_int64 = struct.Struct("q").pack  # one int as int64 bytes, without a Python frame


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
    # (state ids, start, stop) when ids == [*head.ids, *state_ids[start:stop], SEP] (rows the request
    # path builds, read-only from then on): collate converts each state's ids to int64 once, not once per
    # question. None = collate copies `ids`.
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def head_len(self) -> int:
        """Tokens of the row's head ([CLS] ... closing [SEP]): the parallel layout's positions."""
        return len(self.head.ids)


def build_row(tok: Any, q: Question, state_ids: list[int], keep_tail: bool,
              max_len: int, head_max_len: int) -> Row:
    """Head + as much state as fits + [SEP], clipped to max_len; refuses rows that lose markers."""
    return row_for(q, build_head(tok, q, head_max_len), state_ids, keep_tail, max_len,
                   tokenizer_view(tok).sep_id, head_max_len)


def row_for(q: Question, head: Head, state_ids: list[int], keep_tail: bool, max_len: int, sep_id: int,
            head_max_len: int, track: bool = False) -> Row:
    """build_row with the question's head at hand; `track` records the row's source for collate."""
    return rows_for(((q, head),), state_ids, keep_tail, max_len, sep_id, head_max_len, track)[0]


def rows_for(pairs: Any, state_ids: list[int], keep_tail: bool, max_len: int, sep_id: int,
             head_max_len: int, track: bool = True) -> list[Row]:
    """The rows of one state, one per (question, head) pair in order, in one frame (the request path builds
    all of a state's rows at once): head + as much state as fits + [SEP], clipped to max_len; rows that
    would lose markers are refused.  `track` records each whole row's source for collate."""
    n = len(state_ids)
    rows = []
    for q, head in pairs:
        head_ids = head.ids
        head_len = len(head_ids)
        room = max(0, max_len - head_len - 1)
        if n <= room:
            start, stop = 0, n
        elif keep_tail:
            start, stop = n - room, n
        else:
            start, stop = 0, room
        part = state_ids if stop - start == n else state_ids[start:stop]
        source = None
        used = stop - start
        if head_len + used < max_len:  # the row fits whole: nothing to clip, every state token used
            ids = [*head_ids, *part, sep_id]
            if track:
                source = (state_ids, start, stop)
        else:
            ids = [*head_ids, *part, sep_id][:max_len]
            used = min(used, max(0, max_len - head_len))
        markers = head.markers
        markers = list(markers) if markers and markers[-1] < max_len else [m for m in markers if m < max_len]
        k = len(q.option_texts)  # (q.k)
        if len(markers) < k:
            raise ValueError(
                f"question '{q.qid}': only {len(markers)} of its {k} option markers fit in max_len={max_len} "
                f"with head_max_len={head_max_len}; lower head_max_len, raise max_len, or use fewer options")
        rows.append(Row(ids, markers, QTYPES[q.qtype], used, n - used, head, source))  # (q.qtype_id)
    return rows


@dataclass
class Batch:
    """Collated tensors (the backend contract) plus the per-row bookkeeping decoding needs: torch tensors, or
    numpy arrays for a runtime without torch (collate(..., arrays=True))."""

    input_ids: Any  # [N, L] int64, pad id on the right
    attention_mask: Any  # [N, L] int64 0/1
    marker_pos: Any  # [N, K] int64, 0 where unused
    marker_mask: Any  # [N, K] bool
    qtype: Any  # [N] int64
    rows: list[Row]
    # The parallel option layout only (spec 3.9; eager forward): [N, L] int64, 0 on pads. Not part of
    # tensors(), the five-tensor backend contract.
    position_ids: Any | None = None
    option_ids: Any | None = None

    def tensors(self) -> tuple[Any, ...]:
        return self.input_ids, self.attention_mask, self.marker_pos, self.marker_mask, self.qtype


def collate(rows: list, pad_id: int, parallel: bool = False, arrays: bool = False) -> Batch:
    """Right-pad rows (Rows, or training rows with ids, markers, qtype, head_len) into one batch, in
    (state, question) order; `parallel` adds the parallel option layout's position and option ids; `arrays`
    leaves the tensors as numpy arrays (no torch).

    Each tensor is assembled as bytes and wrapped without a copy: ten numpy/torch calls however many rows
    (benchmarks/RESULTS.md, bench_overhead).
    """
    n = len(rows)
    width = max([len(r.ids) for r in rows])
    k = max([len(r.markers) for r in rows])
    pad = _pack_int64(pad_id)
    ids, mask, marker_pos, marker_mask = bytearray(), bytearray(), bytearray(), bytearray()
    packed: dict = {}  # id(state ids) -> (state ids, their int64 bytes): each state packed once
    qtype = bytearray()
    for r in rows:
        length, markers = len(r.ids), len(r.markers)
        head, source = getattr(r, "head", None), getattr(r, "source", None)  # (training rows carry neither)
        if source is not None and head.id_bytes is not None:  # ids == [*head.ids, *state[start:stop], SEP]
            state, start, stop = source
            entry = packed.get(id(state))
            if entry is None:
                entry = packed[id(state)] = (state, int64_bytes(state))  # holds `state`: its id stays valid
            ids += head.id_bytes
            ids += entry[1][8 * start:8 * stop]
            ids += _pack_int64(r.ids[-1])
            # a tracked row's markers are a prefix of its head's (row_for): all of them when as many
            marker_bytes = head.marker_bytes
            if marker_bytes is None or markers != len(head.markers):
                marker_bytes = int64_bytes(r.markers)
        else:
            ids += int64_bytes(r.ids)
            marker_bytes = int64_bytes(r.markers)
        ids += pad * (width - length)
        mask += _ONE * length + _ZERO * (width - length)
        marker_pos += marker_bytes + _ZERO * (k - markers)
        marker_mask += b"\x01" * markers + b"\x00" * (k - markers)
        qtype += _pack_int64(r.qtype)
    # tensors over the buffers, shared, not copied: numpy shapes them and torch.from_numpy wraps them
    wrap = _identity if arrays else _torch().from_numpy
    array = np.ndarray
    batch = Batch(wrap(array((n, width), _INT64, ids)), wrap(array((n, width), _INT64, mask)),
                  wrap(array((n, k), _INT64, marker_pos)), wrap(array((n, k), _BOOL, marker_mask)),
                  wrap(array((n,), _INT64, qtype)), rows)
    if parallel:
        position_ids, option_ids = parallel_ids([(len(r.ids), r.head_len, r.markers) for r in rows], width)
        batch.position_ids, batch.option_ids = wrap(position_ids), wrap(option_ids)
    return batch


def _identity(x: Any) -> Any:
    return x


def _torch() -> Any:
    import torch

    return torch


_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)


def parallel_ids(rows: list[tuple], width: int) -> tuple[np.ndarray, np.ndarray]:
    """[N, width] position and option ids of the parallel layout, zeros on the pads; `rows` holds each
    row's (length, head length, markers)."""
    from .parallel_layout import row_positions

    ids = np.zeros((2, len(rows), width), dtype=np.int64)
    for i, (length, head_len, markers) in enumerate(rows):
        ids[0, i, :length], ids[1, i, :length] = row_positions(length, head_len, markers)
    return ids[0], ids[1]


WARMUP_SHAPES = ((1, 64, 3), (4, 128, 5))  # (rows, tokens, markers) of the synthetic warm-up batches


def warmup_batch(rows: int, tokens: int, markers: int, fill_id: int, max_len: int | None) -> Batch:
    """A synthetic batch (spec 4: `warmup`): ids all `fill_id`, every token live, markers at 1..m, qtype 0;
    tokens capped at max_len but at least markers + 2."""
    length = max(min(tokens, max_len) if max_len else tokens, markers + 2)
    torch = _torch()
    ids = torch.full((rows, length), fill_id, dtype=torch.long)
    pos = torch.arange(1, markers + 1).repeat(rows, 1)
    return Batch(ids, torch.ones_like(ids), pos, torch.ones_like(pos, dtype=torch.bool),
                 torch.zeros(rows, dtype=torch.long), [])
