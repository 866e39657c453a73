"""ModernBERT's rotary embedding for the eager CPU bf16 forward: the same fp32 arithmetic in fewer passes.

transformers' ``apply_rotary_pos_emb`` upcasts q and k twice each and builds ``rotate_half`` with a negation
and a concatenation; in a bf16 CPU forward those full-size fp32 temporaries cost 7-11% of a 16 x 3
`predict_batch` and 1-4% of a 1 x 3 `predict` (benchmarks/results/cpu_rotary_2026-12-06*.json).  ``apply_rotary`` computes the same products and sums in the
same order (``x*cos - x2*sin1`` is ``x*cos + (-x2)*sin1`` exactly in IEEE arithmetic), so every finite and
infinite output is bit-identical (a NaN may differ in its sign bit); it replaces transformers' function only
while ``scope()`` is entered (around the eager backend's CPU bf16 forward), only if the function there is
still the one a self-check found bit-identical, and puts it back only if nobody replaced ours meanwhile.

Where the agent's bf16 Wqkv copies have their q/k rows in rotation-pair order (``pairs_side_by_side``; the
product is marked, ``mark_paired``), each rotation is one complex product on contiguous pairs, in fewer passes;
the rotation's bits are the same, q.k is summed in another order (16 x 3 1.08-1.12x, answers within 0.0013:
benchmarks/results/cpu_rotary_pairs_2026-12-07*.json).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator

import torch

_lock = threading.Lock()
_users = 0  # forwards inside scope(); the module function is restored when the last one leaves
_saved: Any = None
_checked: Any = None  # the transformers function compared with ours: (function, whether it matched)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    half = xf.shape[-1] // 2
    out = xf * cos
    out[..., :half] -= xf[..., half:] * sin[..., :half]
    out[..., half:] += xf[..., :half] * sin[..., half:]
    return out.to(x.dtype)


def turned_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin with rotate_half's sign folded in: rotate_half(x) * sin == swap_halves(x) * turned_sin(sin)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)


def rotate_pointwise(x: torch.Tensor, cos: torch.Tensor, turned: torch.Tensor) -> torch.Tensor:
    """``_rotate`` for a compiled graph, q or k [N, H, L, hd] with cos / turned_sin(sin) [1, L, hd]: one
    vectorised pointwise pass over [.., 2, hd / 2] (Inductor writes rotate_half's cat, or ``_rotate``'s slice
    updates, out as separate fp32 buffers); the same products and sums, so the same bits."""
    halves = (2, x.shape[-1] // 2)
    xf = x.float().unflatten(-1, halves)
    out = xf * cos.unflatten(-1, halves)[:, None] + xf.flip(-2) * turned.unflatten(-1, halves)[:, None]
    return out.flatten(-2).to(x.dtype)


_marks = threading.local()  # .outputs: {id: Wqkv output} of this thread whose q/k rows are in rotation pairs
_pair_heads = True  # (benchmarks switch the paired layout off for their A/B)


def pairs_side_by_side(rows: torch.Tensor, head_dim: int) -> torch.Tensor:
    """ModernBERT's Wqkv weight [3d, in] or bias [3d] with the q and k rows of every head reordered from
    (j, j + head_dim/2) halves to side-by-side pairs (2j, 2j + 1); the v rows as they were.  q.k is the same sum
    in another order, and the rotation becomes one complex product per pair (``apply_rotary`` on a
    ``mark_paired`` output)."""
    d2 = 2 * (rows.shape[0] // 3)
    qk = rows[:d2].unflatten(0, (d2 // head_dim, 2, head_dim // 2)).transpose(1, 2).flatten(0, 2)
    return torch.cat((qk, rows[d2:]))


def mark_paired(output: torch.Tensor) -> None:
    """`output` (a Wqkv product with ``pairs_side_by_side`` rows) holds q/k in rotation pairs: ``apply_rotary``
    rotates views of it as pairs, and everything else as transformers lays it out."""
    outputs = getattr(_marks, "outputs", None)
    if outputs is None:
        outputs = _marks.outputs = weakref.WeakValueDictionary()
    outputs[id(output)] = output


def _paired(x: torch.Tensor) -> bool:
    base = x if x._base is None else x._base
    outputs = getattr(_marks, "outputs", None)
    return outputs is not None and outputs.get(id(base)) is base


def _rotate_paired(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    pairs = x.to(torch.float32, memory_format=torch.contiguous_format, copy=True).unflatten(-1, (-1, 2))
    torch.view_as_complex(pairs).mul_(cis)  # (x1 cos - x2 sin, x1 sin + x2 cos): transformers' products and sums
    return pairs.flatten(-2).to(x.dtype)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                 unsqueeze_dim: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' ModernBERT ``apply_rotary_pos_emb``, bit for bit, without the rotate_half temporaries
    (q/k from a ``mark_paired`` Wqkv output: rotated as side-by-side pairs, one complex product each)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    paired = _paired(q), _paired(k)
    if not any(paired):
        return _rotate(q, cos, sin), _rotate(k, cos, sin)
    half = cos.shape[-1] // 2
    # a pair shares one angle only where the table repeats its halves (transformers' cat((freqs, freqs)))
    if not all(paired) or not (torch.equal(cos[..., :half], cos[..., half:])
                               and torch.equal(sin[..., :half], sin[..., half:])):
        raise RuntimeError("laya.rotary: q/k in rotation pairs need both from one paired Wqkv and a cos/sin table "
                           "with equal halves")
    cis = torch.complex(cos[..., :half].float(), sin[..., :half].float())
    return _rotate_paired(q, cis), _rotate_paired(k, cis)


def _modeling() -> Any:
    try:
        from transformers.models.modernbert import modeling_modernbert
    except ImportError:
        return None
    return modeling_modernbert if callable(getattr(modeling_modernbert, "apply_rotary_pos_emb", None)) else None


def matches_installed() -> bool:
    """Whether ``apply_rotary`` and ``rotate_pointwise`` give the bits of transformers' current function (bf16
    and fp32, odd strides); checked once per function object."""
    global _checked
    module = _modeling()
    current = getattr(module, "apply_rotary_pos_emb", None)
    if current is apply_rotary and _saved is not None:
        current = _saved  # (inside scope(): the function we stand in for)
    if _checked is None or _checked[0] is not current:
        ok = module is not None
        gen = torch.Generator().manual_seed(0)
        for dtype in (torch.bfloat16, torch.float32) if ok else ():
            qkv = torch.randn(2, 7, 3, 4, 32, generator=gen).mul_(30).to(dtype)
            q, k = (t.transpose(1, 2) for t in qkv.unbind(dim=-3)[:2])
            cos, sin = torch.randn(2, 2, 7, 32, generator=gen).unbind(0)
            try:
                want = current(q, k, cos, sin, unsqueeze_dim=1)
                got = apply_rotary(q, k, cos, sin, unsqueeze_dim=1)
                pointwise = tuple(rotate_pointwise(x, cos[:1], turned_sin(sin[:1])) for x in (q, k))
                ok = ok and all(w.dtype == g.dtype == p.dtype and torch.equal(w, g) and torch.equal(w[:1], p[:1])
                                for w, g, p in zip(want, got, pointwise))
            except Exception:  # noqa: BLE001 - another signature or semantics: keep transformers' own
                ok = False
        _checked = (current, ok)
    return _checked[1]


@contextlib.contextmanager
def scope() -> Iterator[bool]:
    """transformers' ModernBERT uses ``apply_rotary`` inside (process-wide while any forward is inside:
    its results are the same bits, so another thread's ModernBERT is unaffected); yields whether transformers
    calls it now."""
    global _users, _saved
    module = _modeling()
    if module is None or not matches_installed():
        yield False
        return
    with _lock:
        if _users == 0:
            if module.apply_rotary_pos_emb is not _checked[0]:  # replaced since the check: leave it alone
                entered = False
            else:
                _saved, module.apply_rotary_pos_emb, entered = module.apply_rotary_pos_emb, apply_rotary, True
        else:
            entered = True
        _users += entered
    try:
        yield entered and module.apply_rotary_pos_emb is apply_rotary
    finally:
        if entered:
            with _lock:
                _users -= 1
                if _users == 0:
                    if module.apply_rotary_pos_emb is apply_rotary:  # (someone else's patch stays theirs)
                        module.apply_rotary_pos_emb = _saved
                    _saved = None
