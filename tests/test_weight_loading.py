"""Reading model.safetensors: the copy path (CPU agents), the assign path (CUDA agents) and its CPU fallback."""

import os
import types

import pytest
import torch

import laya
from laya import agent as agent_module
from laya.checkpoint import load_weights
from laya.model import build_model


def fresh_model(agent):
    encoder_dir = os.path.join(agent.model_dir, "encoder")
    return build_model(agent.cfg, encoder_dir if os.path.isdir(encoder_dir) else None, pretrained=False)


def assert_same_weights(model, reference):
    got, want = model.state_dict(), reference.state_dict()
    assert got.keys() == want.keys()
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name


def test_assign_path_gives_the_copy_paths_parameters(tiny_checkpoint):
    reference = laya.load(tiny_checkpoint, device="cpu")
    model = fresh_model(reference)
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    load_weights(model, reference.model_dir, "cpu", assign=True)  # what a CUDA agent runs, on the CPU here
    assert_same_weights(model, reference.model)
    for name, p in model.named_parameters():
        assert isinstance(p, torch.nn.Parameter) and p.requires_grad == flags[name] and p.is_contiguous(), name
    assert dict(model.named_buffers()).keys() == dict(reference.model.named_buffers()).keys()


@pytest.mark.parametrize("failure", [torch.cuda.OutOfMemoryError("CUDA out of memory"),
                                     RuntimeError("CUDA error: no kernel image is available for execution")])
def test_a_failed_gpu_read_falls_back_to_the_cpu_read(tiny_checkpoint, monkeypatch, failure):
    reference = laya.load(tiny_checkpoint, device="cpu")
    calls = []

    def flaky(model, model_dir, device="cpu", assign=False):
        calls.append((str(device), assign))
        if assign:
            raise failure
        return load_weights(model, model_dir, device, assign)

    monkeypatch.setattr(agent_module, "load_weights", flaky)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    model = fresh_model(reference)
    fake_agent = types.SimpleNamespace(device=torch.device("cuda"))
    agent_module.Agent._load_weights(fake_agent, model, reference.model_dir)
    assert calls == [("cuda:0", True), ("cpu", False)]
    assert_same_weights(model, reference.model)


def test_a_bad_checkpoint_still_raises_from_the_cpu_read(tiny_checkpoint, monkeypatch, tmp_path):
    reference = laya.load(tiny_checkpoint, device="cpu")
    from safetensors.torch import save_file

    state = {k: v.clone() for k, v in reference.model.state_dict().items()}
    state.pop(next(iter(state)))
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="Incompatible checkpoint"):
        load_weights(fresh_model(reference), str(tmp_path), "cpu", assign=True)
