"""CPU precision choice: fp32 by default (answers unchanged), bf16 only when asked, shown by the CLI."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from laya import cpu_features, device


def with_cpu(monkeypatch, **flags):
    base = cpu_features.features()
    fake = dataclasses.replace(base, **{"amx_bf16": False, "avx512_bf16": False, **flags})
    monkeypatch.setattr(cpu_features, "features", lambda: fake)


def test_default_is_fp32_and_says_so(monkeypatch):
    monkeypatch.delenv("LAYA_CPU_AMP", raising=False)
    p = device.precision_policy(torch.device("cpu"), {})
    assert (p.dtype, p.amp_enabled) == (torch.float32, False)
    assert device.describe(p, torch.device("cpu")) == "cpu: float32 (default)"


@pytest.mark.parametrize("native", [True, False])
def test_auto_follows_native_bf16(monkeypatch, native):
    with_cpu(monkeypatch, avx512_bf16=native)
    p = device.cpu_precision("auto")
    assert (p.dtype, p.amp_enabled) == ((torch.bfloat16, True) if native else (torch.float32, False))
    assert "LAYA_CPU_AMP=auto" in p.reason


def test_bf16_without_native_support_warns(monkeypatch):
    with_cpu(monkeypatch)
    with pytest.warns(RuntimeWarning, match="emulated"):
        p = device.cpu_precision("bf16")
    assert p.dtype == torch.bfloat16 and p.amp_enabled
    with_cpu(monkeypatch, amx_bf16=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert device.cpu_precision("bfloat16").amp_enabled


def test_reason_does_not_change_equality():
    assert device.Precision(torch.float32, False, reason="x") == device.Precision(torch.float32, False)


def test_agent_dtype_shows_the_choice(tiny_checkpoint, agent, monkeypatch):
    import laya

    with_cpu(monkeypatch, avx512_bf16=True)
    monkeypatch.setenv("LAYA_CPU_AMP", "auto")
    auto = laya.load(tiny_checkpoint, device="cpu")
    assert auto.dtype == torch.bfloat16 and auto.amp_enabled and agent.dtype == torch.float32
    assert "native bf16" in auto.precision.reason


def test_cli_notes_the_precision_only_when_asked(monkeypatch):
    from laya.cli import build_parser, precision_note

    args = build_parser().parse_args(["--predict", "--device", "cpu", "hello"])
    monkeypatch.delenv("LAYA_CPU_AMP", raising=False)
    assert precision_note(args) is None  # the published output stays as it was
    with_cpu(monkeypatch, avx512_bf16=True)
    monkeypatch.setenv("LAYA_CPU_AMP", "bf16")
    assert precision_note(args) == "laya: cpu: bfloat16 autocast (LAYA_CPU_AMP=bf16)"
    onnx = build_parser().parse_args(["--predict", "--device", "cpu", "--backend", "onnx", "hello"])
    assert precision_note(onnx) is None
