"""The Rust tokenizer the Python ASCII paths (laya.wordpiece, laya.bytebpe) are checked against."""

import tokenizers


def rust_backend(tokenizer_json: str) -> "tokenizers.Tokenizer":
    """The backend of a tokenizer.json as the request path uses it: no padding, no truncation."""
    backend = tokenizers.Tokenizer.from_file(tokenizer_json)
    backend.no_padding()
    backend.no_truncation()
    return backend


def rust_ids(backend, text: str) -> list:
    return backend.encode(text, add_special_tokens=False).ids
