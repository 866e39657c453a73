"""Requests for FastLaya, shared by the CPU and CUDA fast-path tests: random token batches, and a wide
request whose features kernel builds while a narrow one runs beside it."""

from __future__ import annotations

import threading

import torch


def make_batch(lens, markers, seed):
    """Random token rows (ids >= 5: no special tokens) with `markers` sorted marker positions each."""
    g = torch.Generator().manual_seed(seed)
    n, width = len(lens), max(lens)
    ids = torch.zeros(n, width, dtype=torch.long)
    mask = torch.zeros(n, width, dtype=torch.long)
    pos = torch.zeros(n, markers, dtype=torch.long)
    live = torch.zeros(n, markers, dtype=torch.bool)
    for i, length in enumerate(lens):
        ids[i, :length] = torch.randint(5, 1000, (length,), generator=g)
        mask[i, :length] = 1
        k = min(markers, length - 1) - (i % 2 if n > 1 else 0)  # some rows use fewer marker slots
        pos[i, :k] = torch.sort(torch.randperm(length - 1, generator=g)[:k] + 1).values
        live[i, :k] = True
    qtype = torch.randint(0, 3, (n,), generator=g)
    return ids, mask, pos, live, qtype


def run_beside_a_wide_build(fast, wide_batch: tuple, narrow_batch: tuple, monkeypatch) -> dict:
    """Start `wide_batch` in a thread with its kernel build held open, run `narrow_batch` to the end in
    another thread meanwhile (60 s at most), then let the build finish. Returns both outputs and a
    serial rerun of the wide request ("wide", "narrow", "wide_again")."""
    building, release = threading.Event(), threading.Event()
    compile_kernels = fast._compile

    def slow_compile(requests):
        if threading.current_thread() is wide:
            building.set()
            assert release.wait(120)
        return compile_kernels(requests)

    monkeypatch.setattr(fast, "_compile", slow_compile)
    results, errors = {}, []

    def run(name, batch):
        try:
            with torch.no_grad():  # (grad mode is per thread)
                results[name] = fast(*batch)
        except BaseException as e:  # noqa: BLE001 - reported by the caller's thread
            errors.append(e)

    wide = threading.Thread(target=run, args=("wide", wide_batch))
    wide.start()
    try:
        assert building.wait(120)
        narrow = threading.Thread(target=run, args=("narrow", narrow_batch))
        narrow.start()
        narrow.join(60)
        assert not narrow.is_alive(), "a narrow request waited for a wider features kernel's build"
    finally:
        release.set()
        wide.join(300)
    assert not wide.is_alive() and not errors, errors
    run("wide_again", wide_batch)
    assert not errors, errors
    return results
