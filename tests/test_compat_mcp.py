"""Compat 0.4.15 §13 (MCP): laya.mcp.device, laya.mcp.remote, the module-level tools of laya.mcp.tools and the
server's wire shape, all without the `mcp` SDK (the server tests skip when it is absent)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from laya.mcp import device as mcp_device


# ---- R-MCP-2 laya.mcp.device ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [(None, None), ("", None), ("   ", None), (" CUDA:0 ", "cuda:0"),
                                           ("cpu", "cpu"), ("MPS", "mps")])
def test_env_device_trims_and_lowercases_the_type(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv("LAYA_DEVICE", raising=False)
    else:
        monkeypatch.setenv("LAYA_DEVICE", raw)
    assert mcp_device.env_device() == expected


def test_env_device_refuses_what_torch_refuses(monkeypatch):
    monkeypatch.setenv("LAYA_DEVICE", "gpu")
    with pytest.raises(ValueError) as e:
        mcp_device.env_device()
    text = str(e.value)
    assert text.startswith("LAYA_DEVICE='gpu' is not a torch device: ")
    assert text.endswith(" -- use a device such as 'cpu', 'cuda', 'cuda:0' or 'mps'")


def test_env_device_refuses_what_torch_rewrites(monkeypatch):
    monkeypatch.setenv("LAYA_DEVICE", "cuda:258")
    with pytest.raises(ValueError) as e:
        mcp_device.env_device()
    assert str(e.value) == ("LAYA_DEVICE='cuda:258' is not the device torch asks for: torch reads it as 'cuda:2' "
                            "-- use a device such as 'cpu', 'cuda', 'cuda:0' or 'mps'")


def test_resolve_device_and_report(monkeypatch):
    import torch

    monkeypatch.delenv("LAYA_DEVICE", raising=False)
    assert mcp_device.resolve_device("weird:force") == "weird:force"
    expected = "cuda" if torch.cuda.is_available() else mcp_device.resolve_device()
    assert mcp_device.resolve_device() == expected
    monkeypatch.setenv("LAYA_DEVICE", "cpu")
    assert mcp_device.resolve_device() == "cpu"
    assert mcp_device.device_report() == {"device": "cpu", "torch_cuda": torch.cuda.is_available(),
                                          "torch_version": torch.__version__}


def test_agent_device_reads_the_type():
    import torch

    class A:
        device = torch.device("cuda", 1)

    class S:
        device = "mps"

    assert mcp_device.agent_device(A()) == "cuda"
    assert mcp_device.agent_device(S()) == "mps"
    assert mcp_device.agent_device(object()) is None


def test_router_agent_never_loads(agent):
    from laya.router import Router

    router = Router(models={"local": "/nowhere"}, default="local")
    assert mcp_device.router_agent(router, "local") is None
    assert mcp_device.router_agent(router, "english") is None
    router.attach("english", agent)
    router.attach("local", agent)
    assert router.loaded == ["english", "local"]
    assert mcp_device.router_agent(router, "en") is agent  # alias -> canonical built-in name
    assert mcp_device.router_agent(router, "LOCAL") is agent
    assert router.loaded == ["english", "local"]  # LRU untouched
    assert mcp_device.router_agent(router, "nope") is None


def test_mcp_modules_import_without_torch_or_sdk():
    code = ("import sys, laya.mcp, laya.mcp.device, laya.mcp.remote, laya.mcp.tools; "
            "print('torch' in sys.modules, 'mcp' in sys.modules, 'fastapi' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]
