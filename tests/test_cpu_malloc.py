"""laya.cpu_malloc: glibc's mmap and trim thresholds raised once per process for CPU inference, or left alone."""

from __future__ import annotations

import platform

import pytest

from laya import cpu_malloc


class FakeLibc:
    def __init__(self, result: int = 1):
        self.calls: list = []
        self.result = result

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.result


@pytest.fixture
def fresh(monkeypatch):
    """A process that has not decided yet, with a fake glibc that records mallopt calls."""
    libc = FakeLibc()
    monkeypatch.setattr(cpu_malloc, "_state", {})
    monkeypatch.setattr(cpu_malloc, "_glibc", lambda: libc)
    monkeypatch.delenv(cpu_malloc.ENV, raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    return libc


def test_raises_both_thresholds_once_per_process(fresh):
    assert cpu_malloc.keep_freed_buffers() is True
    assert cpu_malloc.keep_freed_buffers() is True
    assert fresh.calls == [(-3, 32 << 20), (-1, 1 << 30)]  # M_MMAP_THRESHOLD, then M_TRIM_THRESHOLD; once


@pytest.mark.parametrize("value", ["default", "DEFAULT", " default "])
def test_env_leaves_the_allocator_alone(fresh, monkeypatch, value):
    monkeypatch.setenv(cpu_malloc.ENV, value)
    assert cpu_malloc.keep_freed_buffers() is False
    assert fresh.calls == []


def test_env_keep_is_the_default(fresh, monkeypatch):
    monkeypatch.setenv(cpu_malloc.ENV, "keep")
    assert cpu_malloc.keep_freed_buffers() is True


@pytest.mark.parametrize("value", ["off", "defualt", "1"])
def test_env_typo_is_refused_with_the_choices(fresh, monkeypatch, value):
    monkeypatch.setenv(cpu_malloc.ENV, value)
    with pytest.raises(ValueError, match=f"LAYA_CPU_MALLOC='{value}' is not a setting: use 'keep'"):
        cpu_malloc.keep_freed_buffers()
    assert fresh.calls == []


@pytest.mark.parametrize("preload", ["/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "libtcmalloc_minimal.so.4"])
def test_another_preloaded_allocator_is_left_alone(fresh, monkeypatch, preload):
    monkeypatch.setenv("LD_PRELOAD", preload)
    assert cpu_malloc.keep_freed_buffers() is False
    assert fresh.calls == []


def test_not_glibc_or_mallopt_refused(monkeypatch):
    monkeypatch.setattr(cpu_malloc, "_state", {})
    monkeypatch.delenv(cpu_malloc.ENV, raising=False)
    monkeypatch.setattr(cpu_malloc, "_glibc", lambda: None)
    assert cpu_malloc.keep_freed_buffers() is False
    refusing = FakeLibc(result=0)
    monkeypatch.setattr(cpu_malloc, "_state", {})
    monkeypatch.setattr(cpu_malloc, "_glibc", lambda: refusing)
    assert cpu_malloc.keep_freed_buffers() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the process's C library is not glibc")
def test_finds_this_processes_glibc():
    libc = cpu_malloc._glibc()
    assert libc is not None and hasattr(libc, "mallopt")


def test_a_cpu_agent_raises_them_at_load(tiny_checkpoint, monkeypatch):
    import laya
    import laya.agent as agent_module

    calls = []
    monkeypatch.setattr(agent_module, "keep_freed_buffers", lambda: calls.append(1) or True)
    laya.load(tiny_checkpoint, device="cpu")
    assert calls == [1]
