"""The fast path's tile table (laya.fast_tiles) against the measurements it comes from."""

from __future__ import annotations

import json
import os

from laya.fast_tiles import GPU_TILES, without_cublas

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "results")


def test_cublas_flags_are_the_h200_sweeps_verdict():
    # a class runs cuBLAS where bench_cublas_table.py measured it faster at every point, not by hand
    with open(os.path.join(RESULTS, "cublas_table_h200_2026-12-06.json")) as f:
        sweep = json.load(f)
    verdict: dict = {}
    for point in sweep["results"]:
        verdict.setdefault(point["kind"], {}).setdefault(point["class"], []).append(point["use_cublas"])
    assert set(verdict) == {"wide", "geglu", "o", "down", "narrow"}
    for kind, per_class in verdict.items():
        assert [tile["cublas"] for tile in GPU_TILES[kind]] == [all(per_class[c]) for c in sorted(per_class)], kind


def test_without_cublas_keeps_every_tile_and_clears_only_the_flags():
    plain = without_cublas(GPU_TILES)
    assert set(plain) == set(GPU_TILES)
    for kind, row in GPU_TILES.items():
        for tile, kept in zip(row, plain[kind]):
            assert {k: v for k, v in kept.items() if k != "cublas"} == {k: v for k, v in tile.items() if k != "cublas"}
            assert kept.get("cublas", False) is False
