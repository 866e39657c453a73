"""The fast path's tile table (laya.fast_tiles) against the measurements it comes from."""

from __future__ import annotations

import json
import os

import pytest

from laya.fast_tiles import GPU_TILES, M_CLASSES, kind_keys, with_tiles, without_cublas

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


def test_with_tiles_replaces_only_the_named_entries_and_checks_them():
    tile = {"bm": 128, "bn": 128, "stages": 2, "threads": 256}
    patched = with_tiles(GPU_TILES, {"attn_full": {"7": tile}})
    assert patched["attn_full"][7] == tile and patched["attn_full"][:7] == GPU_TILES["attn_full"][:7]
    assert all(patched[kind] is row for kind, row in GPU_TILES.items() if kind != "attn_full")
    assert GPU_TILES["attn_full"][7] != tile  # the shipped table is untouched
    with pytest.raises(ValueError, match="no tile kind 'attn'"):
        with_tiles(GPU_TILES, {"attn": {"7": tile}})
    with pytest.raises(ValueError, match=f"class '8' of 'rope' is not one of 0..{len(M_CLASSES) - 1}"):
        with_tiles(GPU_TILES, {"rope": {"8": tile}})
    with pytest.raises(ValueError, match="class 'last' of 'rope' is not one of"):
        with_tiles(GPU_TILES, {"rope": {"last": tile}})
    with pytest.raises(ValueError, match=r"tile keys \['treads'\] of 'rope' class 7 are not tile keys"):
        with_tiles(GPU_TILES, {"rope": {"7": {"bm": 4, "treads": 128}}})
    # a key another kind's kernels take is refused too: the kernel would fall back to its default tile
    with pytest.raises(ValueError, match=r"tile keys \['prefetch'\] of 'add_ln' class 2 are not tile keys of that"):
        with_tiles(GPU_TILES, {"add_ln": {"2": {"bm": 1, "threads": 128, "prefetch": 8}}})
    with pytest.raises(ValueError, match=r"\['release'\] of 'rope'"):
        with_tiles(GPU_TILES, {"rope": {"2": {"bm": 1, "threads": 128, "release": True}}})
    with_tiles(GPU_TILES, {"geglu": {"2": {**GPU_TILES["geglu"][2], "prefetch": 8, "release": True}},
                           "attn_window": {"2": {**GPU_TILES["attn_window"][2], "release": True}}})


def test_every_table_entry_carries_only_its_kinds_keys():
    for kind, row in GPU_TILES.items():
        for c, tile in enumerate(row):
            assert set(tile) <= set(kind_keys(kind)), (kind, c)


def test_large_m_attention_tiles_are_the_occupancy_sweeps_best():
    # the varlen sweep on case d's batch picked the three-blocks-per-SM tile for both layer kinds
    with open(os.path.join(RESULTS, "tiles_varlen_occupancy_h100_2026-12-07.json")) as f:
        sweep = json.load(f)["results"]
    for kind, name in (("attn_full", "attn_varlen_window0"), ("attn_window", "attn_varlen_window64")):
        times = {k: v for k, v in sweep[name]["320"]["candidates_ms"].items() if v is not None}
        best = dict(part.split("=") for part in min(times, key=times.get).split(","))
        assert {k: int(v) for k, v in best.items()} == GPU_TILES[kind][-1]
