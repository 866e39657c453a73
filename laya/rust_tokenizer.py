"""A checkpoint's tokenizer through the `tokenizers` package alone (no transformers, no torch).

The runtimes without torch (the ONNX agent) read what the request path needs: the special tokens and their
ids, a Rust backend (padding and truncation off), `tok(text, add_special_tokens=...)` and `decode`. Ids and
decoded texts equal transformers' (tests/test_onnx_start.py checks them on the test checkpoints).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

SPECIAL_TOKENS = ("cls_token", "sep_token", "pad_token", "mask_token", "unk_token")
_cache: dict[tuple[str, float], "RustTokenizer"] = {}
_cache_lock = threading.Lock()


def _content(value: Any) -> str | None:
    """A special token as tokenizer configs write it: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, dict) else {}


def clean_up_spaces(text: str) -> str:
    """The space clean-up a tokenizer config can ask decode for (spaces before punctuation, contractions)."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text


class RustTokenizer:
    def __init__(self, tokenizer_dir: str):
        from tokenizers import Tokenizer

        backend = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
        backend.no_padding()
        backend.no_truncation()
        self.backend_tokenizer = backend
        config = _read_json(os.path.join(tokenizer_dir, "tokenizer_config.json"))
        special_map = _read_json(os.path.join(tokenizer_dir, "special_tokens_map.json"))
        for name in SPECIAL_TOKENS:
            token = _content(config.get(name)) or _content(special_map.get(name))
            setattr(self, name, token)
            setattr(self, f"{name}_id", backend.token_to_id(token) if token else None)
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces", False))

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict:
        return {"input_ids": self.backend_tokenizer.encode(text, add_special_tokens=add_special_tokens).ids}

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        text = self.backend_tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return clean_up_spaces(text) if self.clean_up_tokenization_spaces else text

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


def load_rust_tokenizer(model_dir: str) -> RustTokenizer | None:
    """The checkpoint's tokenizer/tokenizer.json as a RustTokenizer (cached per directory and mtime), or None
    when the checkpoint has no tokenizer.json (then only transformers can build it)."""
    tokenizer_dir = os.path.join(model_dir, "tokenizer")
    path = os.path.join(tokenizer_dir, "tokenizer.json")
    if not os.path.isfile(path):
        return None
    key = (os.path.realpath(tokenizer_dir), os.path.getmtime(path))
    with _cache_lock:
        if key not in _cache:
            _cache[key] = RustTokenizer(tokenizer_dir)
        return _cache[key]
