"""Device resolution and the autocast policy table."""

import pytest
import torch

from laya.device import precision_policy, resolve_device


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA fallback")
def test_missing_cuda_falls_back_to_cpu_with_a_warning():
    with pytest.warns(RuntimeWarning, match=r"^Warning: CUDA requested but not available\. Falling back to CPU\.$"):
        assert resolve_device("cuda") == torch.device("cpu")
    assert resolve_device(" AUTO ").type in ("cpu", "mps", "xpu")
    with pytest.raises(ValueError, match="not a device name"):
        resolve_device("gpu please")


@pytest.mark.parametrize("capability,env,amp_dtype,expected", [
    ((9, 0), None, "bf16", torch.bfloat16), ((9, 0), None, None, torch.float16), ((8, 0), "fp16", "bf16", torch.float16),
    ((8, 6), "bfloat16", "fp16", torch.bfloat16), ((7, 5), "bf16", "bf16", torch.float16)])
def test_cuda_policy(monkeypatch, capability, env, amp_dtype, expected):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    if env:
        monkeypatch.setenv("LAYA_CUDA_AMP", env)
    else:
        monkeypatch.delenv("LAYA_CUDA_AMP", raising=False)
    cfg = {} if amp_dtype is None else {"amp_dtype": amp_dtype}
    p = precision_policy(torch.device("cuda"), cfg)
    assert p.amp_enabled and p.dtype == expected


def test_cuda_capability_failure_uses_fp16(monkeypatch):
    def fail(device=None):
        raise RuntimeError("driver")
    monkeypatch.setattr(torch.cuda, "get_device_capability", fail)
    with pytest.warns(RuntimeWarning, match=r"^Warning: could not query CUDA capability; assuming fp16 defaults\.$"):
        assert precision_policy(torch.device("cuda"), {}).dtype == torch.float16


def test_mps_rows_threshold_and_cpu(monkeypatch):
    monkeypatch.setenv("LAYA_MPS_AMP_MIN_ROWS", "nonsense")
    p = precision_policy(torch.device("mps"), {})
    assert p.mps_amp_min_rows == 5
    assert p.dtype_for(torch.device("mps"), 4) == torch.float32 and p.dtype_for(torch.device("mps"), 5) == torch.float16
    monkeypatch.setenv("LAYA_MPS_AMP_MIN_ROWS", "0")
    assert precision_policy(torch.device("mps"), {}).mps_amp_min_rows == 1
    assert precision_policy(torch.device("xpu"), {}).dtype == torch.bfloat16
    monkeypatch.delenv("LAYA_CPU_AMP", raising=False)
    assert not precision_policy(torch.device("cpu"), {}).amp_enabled
    monkeypatch.setenv("LAYA_CPU_AMP", "fp16")  # only bf16 enables CPU autocast
    assert not precision_policy(torch.device("cpu"), {}).amp_enabled
