"""The fast path's tile table: which GEMM, attention and row-kernel tiles each token-row class uses."""

from __future__ import annotations


def _t(bm, bn, bk, stages, threads, splits=0, cublas=False):
    """A GEMM tile; cublas=True: the class runs cuBLAS instead (laya.cublas_gemm), the tile is TileLang's best."""
    return dict(bm=bm, bn=bn, bk=bk, stages=stages, threads=threads, splits=splits, cublas=cublas)


# Tiles per token-row class (a plan of M rows uses the first class whose bound holds M), from H200 sweeps:
# small_gemm_h200_2026-11-29.json, tiles_large_h200_2026-11-29.json (benchmarks/RESULTS.md, bench_tiles).
# splits > 0: split-K, whose fp32 partials the following residual-add + LayerNorm sums.
# cublas=True: cuBLAS measured >= 2% faster per forward at that class (cublas_table_h200_2026-12-06.json).
M_CLASSES = (32, 64, 128, 256, 512, 1024, 2048, None)
ATTN_OCCUPIED = dict(bm=64, bn=64, stages=2, threads=128, min_blocks=3)
GPU_TILES = {
    # N >= 3d: the encoder's and the head's QKV, the head's 4d-wide first FFN layer
    "wide": (_t(16, 64, 128, 4, 128), _t(64, 32, 128, 3, 128), _t(64, 64, 128, 3, 128),
             _t(128, 64, 64, 4, 128, cublas=True), _t(128, 128, 64, 3, 256, cublas=True),
             _t(128, 256, 64, 3, 256, cublas=True), _t(128, 256, 64, 3, 256, cublas=True),
             _t(128, 256, 64, 4, 256, cublas=True)),
    "geglu": (_t(16, 64, 128, 3, 128), _t(64, 32, 128, 2, 128), _t(128, 32, 128, 2, 128), _t(128, 64, 64, 3, 256),
              _t(128, 128, 64, 3, 256), _t(128, 128, 64, 3, 256), _t(128, 128, 64, 3, 256),
              _t(128, 128, 64, 3, 256)),
    # N = d without split-K: the head's output projections (their output is not summed by add_ln alone)
    "narrow": (_t(64, 32, 128, 3, 128, cublas=True),) * 3 + (_t(64, 32, 128, 3, 128),)
              + (_t(64, 64, 128, 3, 128, cublas=True), _t(128, 64, 64, 4, 128, cublas=True),
                 _t(128, 128, 64, 3, 256, cublas=True), _t(128, 256, 64, 3, 256)),
    # the encoder's attention output (K = d) and MLP down-projection (K = ffn), summed by add_ln
    "o": (_t(16, 64, 128, 4, 128, splits=4), _t(32, 64, 128, 4, 128, splits=4), _t(32, 64, 128, 4, 128, splits=2),
          _t(64, 32, 128, 3, 128), _t(64, 64, 128, 3, 128), _t(128, 64, 64, 4, 128),
          _t(128, 128, 64, 3, 256, cublas=True), _t(128, 256, 64, 3, 256, cublas=True)),
    "down": (_t(16, 64, 128, 4, 128, splits=8), _t(32, 64, 128, 4, 128, splits=4), _t(64, 64, 128, 3, 128, splits=4),
             _t(64, 64, 128, 3, 128, splits=2), _t(64, 64, 128, 3, 128, cublas=True),
             _t(128, 64, 64, 4, 128, cublas=True), _t(128, 128, 64, 3, 256, cublas=True), _t(128, 256, 64, 3, 256)),
    # Row-wise kernels: one row per block (more blocks for few rows; add_ln within 1.2% of its best at 8k and
    # 92k rows, rowwise_h100_2026-12-07.json); RoPE's measured large-M optimum for many rows.
    "rope": (dict(bm=1, threads=128),) * 7 + (dict(bm=4, threads=128),),
    "add_ln": (dict(bm=1, threads=128),) * 8,
    # Attention: 64-row query blocks give few-token plans twice the thread blocks (1 x 128 tokens: 32); for many
    # rows, three blocks per SM hide each one's short key loop (tiles_varlen_occupancy_h100_2026-12-07.json).
    "attn_full": (dict(bm=64, bn=64, stages=1, threads=128),) * 7 + (ATTN_OCCUPIED,),
    "attn_window": (dict(bm=64, bn=64, stages=1, threads=128),) * 7 + (ATTN_OCCUPIED,),
}


def without_cublas(table: dict) -> dict:
    """`table` with every GEMM on TileLang's tile (the A/B baseline of its cuBLAS classes)."""
    return {kind: tuple({**tile, "cublas": False} if "cublas" in tile else tile for tile in row)
            for kind, row in table.items()}


def with_tiles(table: dict, entries: dict) -> dict:
    """`table` with `entries` = {kind: {class index: tile}} in place of its own (a tile-table A/B's candidate)."""
    out = dict(table)
    for kind, per_class in entries.items():
        if kind not in table:
            raise ValueError(f"no tile kind {kind!r} in the table; kinds: {', '.join(table)}")
        row = list(table[kind])
        for c, tile in per_class.items():
            if not str(c).isdigit() or int(c) >= len(row):
                raise ValueError(f"class {c!r} of {kind!r} is not one of 0..{len(row) - 1}")
            allowed = kind_keys(kind)
            unknown = set(tile) - set(allowed)
            if unknown:
                raise ValueError(f"tile keys {sorted(unknown)} of {kind!r} class {c} are not tile keys of that "
                                 f"kind; use {', '.join(allowed)}")
            row[int(c)] = dict(tile)
        out[kind] = tuple(row)
    return out


# a kernel request's tuned tile; without them, its defaults
TILE_KEYS = ("bm", "bn", "bk", "stages", "threads", "min_blocks", "prefetch", "release")
# the keys each kind's kernels take (a key a kernel refuses would silently send it back to its default tile)
_GEMM_KEYS = ("bm", "bn", "bk", "stages", "threads", "min_blocks", "prefetch", "release", "splits", "cublas")
_KIND_KEYS = {"rope": ("bm", "threads"), "add_ln": ("bm", "threads", "release"),
              "attn_full": ("bm", "bn", "stages", "threads", "min_blocks", "release")}
_KIND_KEYS["attn_window"] = _KIND_KEYS["attn_full"]


def kind_keys(kind: str) -> tuple:
    """The tile keys a table entry of `kind` may carry (GEMM kinds: everything a GEMM tile takes)."""
    return _KIND_KEYS.get(kind, _GEMM_KEYS)


def m_class(tokens: int) -> int:
    """Index into M_CLASSES (and the GPU_TILES rows) of a plan with `tokens` token rows."""
    return next(i for i, bound in enumerate(M_CLASSES) if bound is None or tokens <= bound)


def bucket_packed(tokens: int) -> int:
    """Packed row counts: multiples of 16 up to 128, then eight steps per octave (<= 12.5% dummies)."""
    if tokens <= 128:
        return max(16, -(-tokens // 16) * 16)
    step = 1 << (tokens.bit_length() - 4)
    return -(-tokens // step) * step
