"""Checkpoint resolution and loading: the published layout, strict weights, clear errors."""

import hashlib
import json
import os
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import laya
from laya.checkpoint import fixed_tokenizer_config, hub_allow_patterns, load_tokenizer, resolve_checkpoint_dir
from laya.registry import looks_local, resolve_model_spec
from laya.revisions import PINNED_REVISIONS, resolve_revision


def copy_checkpoint(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def test_safetensors_names_are_the_published_ones(tiny_checkpoint):
    keys = set(load_file(os.path.join(tiny_checkpoint, "model.safetensors")))
    head = {k for k in keys if not k.startswith("encoder.")}
    assert len(head) == 36  # 24 head-layer tensors + type_emb + 6 scorer + 4 act head + temperature
    for name in ("encoder.embeddings.tok_embeddings.weight", "encoder.embeddings.norm.weight",
                 "encoder.layers.0.attn.Wqkv.weight", "encoder.layers.1.attn_norm.weight",
                 "encoder.layers.1.mlp.Wi.weight", "encoder.final_norm.weight",
                 "head.layers.1.self_attn.in_proj_weight", "head.layers.0.norm2.bias", "type_emb.weight",
                 "scorer.3.bias", "act_head.0.weight", "act_head.2.bias", "temperature"):
        assert name in keys, name
    assert "encoder.layers.0.attn_norm.weight" not in keys
    tensors = load_file(os.path.join(tiny_checkpoint, "model.safetensors"))
    assert tensors["act_head.0.weight"].shape == (256, 64 + 4) and tensors["act_head.2.weight"].shape == (2, 256)
    assert all(t.dtype == torch.float16 for t in tensors.values())  # fp16 on disk like the release


def test_strict_load_names_the_bad_keys(tiny_checkpoint, tmp_path):
    bad = copy_checkpoint(tiny_checkpoint, tmp_path / "bad")
    path = os.path.join(bad, "model.safetensors")
    state = load_file(path)
    state.pop("scorer.1.weight")
    state["scorer.9.weight"] = torch.zeros(2)
    state["type_emb.weight"] = torch.zeros(4, 64, dtype=torch.float16)
    save_file(state, path)
    with pytest.raises(ValueError) as err:
        laya.load(bad, device="cpu")
    msg = str(err.value)
    assert "1 missing: scorer.1.weight" in msg
    assert "1 unexpected: scorer.9.weight" in msg
    assert "type_emb.weight: checkpoint (4, 64) vs model (3, 64)" in msg


def test_non_laya_weights_are_refused(tiny_checkpoint, tmp_path):
    bad = copy_checkpoint(tiny_checkpoint, tmp_path / "enc-only")
    path = os.path.join(bad, "model.safetensors")
    save_file({k: v for k, v in load_file(path).items() if k.startswith("encoder.")}, path)
    with pytest.raises(ValueError, match=r"no weights with prefixes \['type_emb.', 'scorer.', 'act_head.'\]"):
        laya.load(bad, device="cpu")


def test_missing_files_errors(tiny_checkpoint, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^Local model path not found: '\./no/such/dir'\. Check that the directory exists and that training saved the model successfully\.$"):
        laya.load("./no/such/dir")
    no_cfg = copy_checkpoint(tiny_checkpoint, tmp_path / "no-cfg")
    os.remove(os.path.join(no_cfg, "rl_agent_config.json"))
    with pytest.raises(FileNotFoundError, match="Incompatible model: .* does not contain 'rl_agent_config.json'"):
        laya.load(no_cfg)
    no_w = copy_checkpoint(tiny_checkpoint, tmp_path / "no-weights")
    os.remove(os.path.join(no_w, "model.safetensors"))
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        laya.load(no_w)
    with pytest.raises(FileNotFoundError, match="Subfolder 'multilingual' not found"):
        laya.load(tiny_checkpoint, subfolder="multilingual")


def test_subfolder_and_temperatures_from_config(tiny_checkpoint, tmp_path):
    root = tmp_path / "bundle"
    copy_checkpoint(tiny_checkpoint, root / "typed-decisions")
    cfg_path = root / "typed-decisions" / "rl_agent_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["temperature"] = [1.6369, 1.2514, 1.9834]
    cfg["temperature_by_options"] = {"choice:11+": 0.10058280825614929, "noul:2": 1.9834}
    cfg_path.write_text(json.dumps(cfg))
    with pytest.warns(RuntimeWarning, match=r"replaced choice:11\+=0.10058280825614929 -> 0.5\."):
        agent = laya.load(str(root), subfolder="typed-decisions", device="cpu")
    assert agent.temperature_by_options == {"choice:11+": 0.5, "noul:2": 1.9834}
    assert agent.temperature_by_options_raw["choice:11+"] == 0.10058280825614929
    assert agent.subfolder == "typed-decisions"


def test_digests(tiny_checkpoint, monkeypatch):
    with open(os.path.join(tiny_checkpoint, "rl_agent_config.json"), "rb") as f:
        good = hashlib.sha256(f.read()).hexdigest()
    laya.load(tiny_checkpoint, expected_sha256={"rl_agent_config.json": good})
    with pytest.raises(ValueError, match=r"^laya: SHA-256 mismatch for rl_agent_config.json: expected 0{64}, got [0-9a-f]{64}\."):
        laya.load(tiny_checkpoint, expected_sha256={"rl_agent_config.json": "0" * 64})
    with pytest.raises(ValueError, match=r"^laya: unsafe path in expected digests: '\.\./x'$"):
        laya.load(tiny_checkpoint, expected_sha256={"../x": good})
    with pytest.raises(ValueError, match=r"^laya: unsafe absolute path in expected digests: '/etc/passwd'$"):
        laya.load(tiny_checkpoint, expected_sha256={"/etc/passwd": good})
    with pytest.raises(FileNotFoundError, match=r"^laya: cannot verify 'nope.bin': no such file under "):
        laya.load(tiny_checkpoint, expected_sha256={"nope.bin": good})
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"rl_agent_config.json": "f" * 64}))
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        laya.load(tiny_checkpoint)


def test_tokenizer_fixup_never_touches_the_callers_files(tiny_checkpoint, tmp_path):
    ckpt = copy_checkpoint(tiny_checkpoint, tmp_path / "tb")
    cfg_path = os.path.join(ckpt, "tokenizer", "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    cfg.update(tokenizer_class="TokenizersBackend", backend="tokenizers", extra_special_tokens=["<x>"])
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    before = open(cfg_path).read()
    tok = load_tokenizer(ckpt, "unused")
    assert open(cfg_path).read() == before
    from transformers import PreTrainedTokenizerFast

    assert tok.mask_token_id == 103 and isinstance(tok, PreTrainedTokenizerFast)
    fixed = fixed_tokenizer_config(cfg)
    assert fixed["tokenizer_class"] == "PreTrainedTokenizerFast" and "backend" not in fixed
    assert fixed["extra_special_tokens"] == {"extra_0": "<x>"}
    assert fixed_tokenizer_config({"tokenizer_class": "BertTokenizer"}) is None


def test_registry_names_and_aliases():
    assert resolve_model_spec(" ML ") == ("convaiinnovations/laya", "multilingual")
    assert resolve_model_spec("decisions") == ("convaiinnovations/laya", "typed-decisions")
    assert resolve_model_spec("Default") == ("convaiinnovations/laya", None)
    assert resolve_model_spec("klingon") is None
    assert looks_local("convaiinnovations/laya") and looks_local("./x") and looks_local("~/x")
    assert not looks_local("english")
    assert hub_allow_patterns("multilingual") == ["multilingual/rl_agent_config.json", "multilingual/model.safetensors",
                                                  "multilingual/tokenizer/*", "multilingual/encoder/*"]
    assert hub_allow_patterns(None)[0] == "rl_agent_config.json"


def test_revisions(monkeypatch):
    monkeypatch.setenv("LAYA_REVISION", " reviewed ")  # stripped; the spelling is exact
    assert resolve_revision("ConvAIInnovations/Laya") == "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851"
    assert resolve_revision("convaiinnovations/laya", "abc") == "abc"
    assert resolve_revision("convaiinnovations/laya", " ") is None  # a blank argument suppresses the env
    with pytest.raises(ValueError):
        resolve_revision("someone/else")
    assert PINNED_REVISIONS["convaiinnovations/laya-typed-decisions"] == "1a793eb568e6718f15941d08f85432581df534e3"


def test_hub_id_loads_offline_from_a_populated_cache(tiny_checkpoint, tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    sha = "1c5edc17a7acd8701df6fc341c0d179f1c62c982"
    repo = tmp_path / "hub" / "models--convaiinnovations--laya"
    copy_checkpoint(tiny_checkpoint, repo / "snapshots" / sha / "multilingual")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(sha)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    agent = laya.load("multilingual", device="cpu")
    assert agent.revision == sha and agent.subfolder == "multilingual"
    assert re.search(r"snapshots[\\/]" + sha, agent.model_dir)
    assert agent.predict("text", {"q": {"type": "noul", "instructions": "ok?"}})["answers"]["q"]["type"] == "noul"
    path, _ = resolve_checkpoint_dir("convaiinnovations/laya", "multilingual")
    assert path == agent.model_dir


def test_bpe_tokenizer_checkpoint(bpe_checkpoint):
    agent = laya.load(bpe_checkpoint, device="cpu")
    tok = agent.tok
    assert tok.mask_token == "[MASK]" and tok.pad_token == "[PAD]" and len(tok) < 5000
    r = agent.predict("please refund my order", {"q": {"type": "choice", "instructions": "Which?", "criteria": ["a", "b"]}})
    assert set(r["answers"]["q"]["probabilities"]) == {"a", "b"}


def test_other_encoder_families_load(tmp_path):
    from make_checkpoint import make_checkpoint

    path = make_checkpoint(str(tmp_path / "bert"), "tiny", "wordpiece", seed=1, std=0.3, family="bert")
    agent = laya.load(path, device="cpu")
    assert type(agent.model.encoder).__name__ == "BertModel"
    a = agent.predict("refund please", {"q": {"type": "noul", "instructions": "Refund?"}})["answers"]["q"]["noul"]
    b = agent.predict("the app crashed", {"q": {"type": "noul", "instructions": "Refund?"}})["answers"]["q"]["noul"]
    assert a != b


def test_model_keyed_digest_env_applies_to_the_named_model_only(tiny_checkpoint, monkeypatch):
    """A Router-style {model: {relpath: hex}} LAYA_SHA256_DIGESTS must not break a plain load of a path
    (nothing to check for it), and is applied by name for registry names and aliases."""
    from laya.checkpoint import parse_digest_env

    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"english": {"rl_agent_config.json": "f" * 64},
                                                          "multi": {"a.json": "1" * 64}}))
    assert laya.load(tiny_checkpoint).predict("hi", {"ok": {"type": "noul", "instructions": "Fine?"}})
    assert parse_digest_env(tiny_checkpoint) is None
    assert parse_digest_env("English ") == {"rl_agent_config.json": "f" * 64}
    assert parse_digest_env("multilingual") == {"a.json": "1" * 64}  # 'multi' is an alias
    monkeypatch.setenv("LAYA_SHA256_DIGESTS", json.dumps({"rl_agent_config.json": "f" * 64}))
    assert parse_digest_env(tiny_checkpoint) == {"rl_agent_config.json": "f" * 64}  # flat: as given
