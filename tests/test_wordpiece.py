"""laya.wordpiece: the Python ASCII WordPiece path gives exactly the Rust tokenizer's ids, or declines."""

import json
import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")

from laya.sequence import encode_many, rust_encode, tokenizer_view  # noqa: E402
from laya.wordpiece import AsciiWordPiece  # noqa: E402

TOKENIZER_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "laya", "demo_checkpoint", "tokenizer", "tokenizer.json")


@pytest.fixture(scope="module")
def backend():
    b = tokenizers.Tokenizer.from_file(TOKENIZER_JSON)
    b.no_padding()
    b.no_truncation()
    return b


@pytest.fixture(scope="module")
def fast(backend):
    wp = AsciiWordPiece.for_backend(backend)
    assert wp is not None
    return wp


def rust_ids(backend, text):
    return backend.encode(text, add_special_tokens=False).ids


TEXTS = [
    "", " ", "\t\n\r", "Hello support team, I was charged twice for the Pro plan!",
    "Every sync attempt fails with error code E503 after about two minutes... (v2.14.3)",
    "My order #482913 was marked as delivered on March 3 but nothing arrived.",
    "AC-48213 / e-mail: someone@example.com; ~`^|{}[]<>=+*&%$\"'\\",
    "unbelievablyoverengineeredsupercalifragilisticexpialidocious words-with-dashes x" * 3,
    "a" * 100, "a" * 101, "b" * 250 + " ok", "Zz9" * 40,
    "MiXeD CaSe and UPPER and lower, tabs\tand\nnewlines\r\nhere",
    "qzxv jjjj xkcd ##hash ## #tag [bracket] [ CLS ] (SEP)",
]


@pytest.mark.parametrize("text", TEXTS)
def test_fixed_texts_match_rust(backend, fast, text):
    assert fast.encode(text) == rust_ids(backend, text)


def test_generated_texts_match_rust(backend, fast):
    rng = random.Random(1234)
    alphabet = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\r")
    words = ["refund", "invoice", "charged", "twice", "crashes", "unbelievable", "qwxz", "##", "[", "]",
             "SEP", "CLS", "mask", "x" * 99, "y" * 120, "E404", "v1.2.3", "naïve", "\x0b", "\x00"]
    checked = covered = 0
    for _ in range(4000):
        if rng.random() < 0.5:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        else:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        ids = fast.encode(text)
        checked += 1
        if ids is not None:
            covered += 1
            assert ids == rust_ids(backend, text), repr(text)
    assert covered > checked * 0.6  # most generated texts take the fast path


@pytest.mark.parametrize("text", ["café au lait", "tab\x0bvertical", "nul\x00byte", "del\x7f", "ünïcode",
                                  "a [SEP] b", "a [sep] b", "[MASK]", "[PAD] [UNK] [CLS]", "\u00a0nbsp"])
def test_declines_text_it_does_not_cover(backend, fast, text):
    assert fast.encode(text) is None


def test_other_pipelines_get_no_fast_path(backend):
    spec = json.loads(backend.to_str())
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    assert AsciiWordPiece.for_backend(tokenizers.Tokenizer.from_str(json.dumps(spec))) is None
    spec = json.loads(backend.to_str())
    spec["normalizer"] = {"type": "Lowercase"}
    assert AsciiWordPiece.for_backend(tokenizers.Tokenizer.from_str(json.dumps(spec))) is None


def test_uncased_tokenizer_keeps_case(backend):
    spec = json.loads(backend.to_str())
    spec["normalizer"]["lowercase"] = False
    spec["normalizer"]["strip_accents"] = False
    cased = tokenizers.Tokenizer.from_str(json.dumps(spec))
    fast = AsciiWordPiece.for_backend(cased)
    assert fast is not None
    for text in ("Hello World", "hello world", "The API returned HTTP 500", "ABC def GhI"):
        assert fast.encode(text) == rust_ids(cased, text)


def test_encode_many_mixes_paths_in_order(tok):
    view = tokenizer_view(tok)
    assert view.ascii is not None  # the test checkpoint's WordPiece tokenizer takes the fast path
    texts = ["plain ascii text", "café crème", "", "a [SEP] b", "UPPER case 123", "émoji 🙂 here", "last one."]
    assert encode_many(tok, texts) == rust_encode(tok, view, texts)
    assert encode_many(tok, texts) == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_added_token_with_whitespace_disables_the_fast_path(backend):
    """Rust matches a normalized added token in the normalised text (tab/newline already spaces): "new\\tyork"
    hits "new york". The fast path checks raw text, so such a tokenizer must not get one."""
    tok = tokenizers.Tokenizer.from_str(backend.to_str())
    tok.add_tokens([tokenizers.AddedToken("new york", normalized=True)])
    assert AsciiWordPiece.for_backend(tok) is None
    assert len(tok.encode("I love new\tyork", add_special_tokens=False).ids) == 3  # the token Rust finds
