"""The ONNX path starts without torch or transformers (issue 24, CPU start): the CLI and laya.load(...,
backend="onnx") import tokenizers + onnxruntime + numpy only, and answer exactly as before."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MINI = os.path.join(ROOT, "laya", "laya_mini")
TEXTS = ["I was charged twice, refund me!", "Hello , world . I don't know !", "café naïve Straße ÅNGSTRÖM",
         "中文 and 日本語 mixed", "emoji 🙂 and [MASK] inside", "", "   spaces   ", "ids 12345 #99 @user a-b_c",
         "Ünïcödé accents: à é î õ ü", "tab\tand\nnewline"]


def test_the_onnx_cli_imports_neither_torch_nor_transformers(tiny_checkpoint, onnx_graph):
    code = ("import sys, json\n"
            "sys.argv = ['laya', 'I was charged twice', '--preset', 'triage', '--model', sys.argv[1], '--backend',"
            " 'onnx', '--onnx-path', sys.argv[2], '--json']\n"
            "import laya.cli\n"
            "try:\n    laya.cli.main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(json.dumps(sorted(m for m in ('torch', 'transformers') if m in sys.modules)), file=sys.stderr)\n")
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code, tiny_checkpoint, onnx_graph], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stderr.strip().splitlines()[-1]) == []
    assert json.loads(out.stdout)["answers"]


def test_rust_tokenizer_equals_transformers(tiny_checkpoint, bpe_checkpoint):
    from laya.checkpoint import load_tokenizer
    from laya.rust_tokenizer import SPECIAL_TOKENS, RustTokenizer

    for model_dir in (tiny_checkpoint, bpe_checkpoint, MINI):
        hf = load_tokenizer(model_dir, "unused")
        rust = RustTokenizer(os.path.join(model_dir, "tokenizer"))
        for name in SPECIAL_TOKENS:
            assert getattr(rust, name) == getattr(hf, name), (model_dir, name)
            assert getattr(rust, f"{name}_id") == getattr(hf, f"{name}_id"), (model_dir, name)
        for text in TEXTS:
            for special in (False, True):
                ids = hf(text, add_special_tokens=special)["input_ids"]
                assert rust(text, add_special_tokens=special)["input_ids"] == ids, (model_dir, text)
            ids = hf(text, add_special_tokens=False)["input_ids"]
            assert rust.decode(ids) == hf.decode(ids, skip_special_tokens=False), (model_dir, text)


def test_onnx_answers_equal_with_either_tokenizer(tiny_checkpoint, onnx_graph):
    import laya
    from laya.checkpoint import load_tokenizer
    from laya.rust_tokenizer import RustTokenizer

    agent = laya.load(tiny_checkpoint, backend="onnx", onnx_path=onnx_graph)
    assert isinstance(agent.tok, RustTokenizer)
    questions = laya.triage_questions()
    states = [{"message": t, "tier": "gold"} for t in TEXTS] + TEXTS
    rust_results = agent.predict_batch(states, questions)
    agent.tok = load_tokenizer(tiny_checkpoint, "unused")
    assert agent.predict_batch(states, questions) == rust_results


def test_the_torch_free_parameter_lists_match_the_signatures():
    from laya.agent import Agent
    from laya.loading import AGENT_PARAMETERS, LOAD_PARAMETERS, load

    assert set(inspect.signature(Agent.__init__).parameters) - {"self"} == AGENT_PARAMETERS
    assert set(inspect.signature(load).parameters) == LOAD_PARAMETERS


def test_onnx_act_softmax_is_the_published_float32_numpy_one(tiny_checkpoint, onnx_graph):
    """spec 1.4: the ONNX agent's act softmax is numpy over the graph's float32 act logits (bits kept)."""
    import numpy as np

    import laya
    from laya.sequence import collate

    agent = laya.load(tiny_checkpoint, backend="onnx", onnx_path=onnx_graph)
    from laya.question_sets import checked_questions

    _, rows = agent._rows("refund me now please", False, checked_questions(laya.triage_questions()), 256, 96)
    batch = collate(rows, agent.tok.pad_token_id, arrays=True)
    _, act = agent._infer(batch)
    raw = agent.forward_backend.run(batch)[1].astype(np.float32)
    e = np.exp(raw - raw.max(axis=-1, keepdims=True))
    assert act == (e / e.sum(axis=-1, keepdims=True)).tolist()


def test_agent_warmup_runs_the_agents_warmup_shapes(tiny_checkpoint):
    import laya

    agent = laya.load(tiny_checkpoint, device="cpu")
    seen = []
    real = agent._infer
    agent._infer = lambda batch: (seen.append(tuple(batch.input_ids.shape)), real(batch))[1]
    agent.WARMUP_SHAPES = ((2, 32, 2),)
    agent.warmup()
    assert seen == [(2, 32)]
    seen.clear()
    agent.warmup(((1, 20, 3),))
    assert seen == [(1, 20)]
