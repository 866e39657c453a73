"""Shared fixtures: checkpoints in the published layout, built once per test session."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> str:
    """Tiny ModernBERT-shaped checkpoint, real WordPiece tokenizer (CLS/SEP/PAD/MASK 101/102/0/103);
    std 0.3 weights so answers differ clearly between inputs (0.02 gives near-uniform ones)."""
    from make_checkpoint import make_checkpoint

    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny"), "tiny", "wordpiece", seed=7, std=0.3)


@pytest.fixture(scope="session")
def bpe_checkpoint(tmp_path_factory) -> str:
    from make_checkpoint import make_checkpoint

    return make_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "tiny-bpe"), "tiny", "bpe", seed=3, std=0.3)


@pytest.fixture(scope="session")
def agent(tiny_checkpoint):
    import laya

    return laya.load(tiny_checkpoint, device="cpu")


@pytest.fixture(scope="session")
def tok(agent):
    return agent.tok
