"""laya.wordpiece: the Python ASCII WordPiece path gives exactly the Rust tokenizer's ids, or declines."""

import json
import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")

from _rust_tokenizer import rust_backend, rust_ids  # noqa: E402

from laya.sequence import encode_many, rust_encode, tokenizer_view  # noqa: E402
from laya.wordpiece import AsciiWordPiece  # noqa: E402

TOKENIZER_JSON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "laya", "laya_mini", "tokenizer", "tokenizer.json")


@pytest.fixture(scope="module")
def backend():
    return rust_backend(TOKENIZER_JSON)


@pytest.fixture(scope="module")
def fast(backend):
    wp = AsciiWordPiece.for_backend(backend)
    assert wp is not None
    return wp


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


# ---- chunk lookups, the per-chunk cache and the texts the benchmarks send -----------------------

# Vocabulary entries that are not one pre-tokeniser word ("##s", "[unused0]") must never be taken whole.
ODD_CHUNKS = ["##s", "##ing", "[unused0]", "[unused12].", "##", "#", "...", "a.b.c", "e-mail", "don't", "1,000.50",
              "U.S.A.", "late.", "late,", ",late", "(v2.14.3)", "#482913", "x" * 100 + ".", "x" * 101 + ",", ".,.,"]


@pytest.mark.parametrize("text", ODD_CHUNKS + [" ".join(ODD_CHUNKS), "\t".join(ODD_CHUNKS).upper()])
def test_chunks_that_are_not_one_word_match_rust(backend, fast, text):
    assert fast.encode(text) == rust_ids(backend, text)
    assert fast.encode(text) == rust_ids(backend, text)  # the second time from the chunk cache


def glued_vocabulary_texts(backend, n, seed):
    """Vocabulary pieces (odd entries included, some upper-cased) glued to punctuation and whitespace."""
    rng = random.Random(seed)
    vocab = sorted(backend.get_vocab(with_added_tokens=False))
    odd = [v for v in vocab if not v.isalnum()]
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 20)):
            w = rng.choice(odd) if rng.random() < 0.3 else rng.choice(vocab)
            parts.append(w.upper() if rng.random() < 0.2 else w)
            parts.append(rng.choice(["", "", ".", ",", "!", "#", "-", "'", ".,"]))
            parts.append(rng.choice(["", " ", " ", " ", "  ", "\t", "\r\n"]))
        yield "".join(parts)


@pytest.mark.parametrize("cased", [False, True])
def test_glued_vocabulary_texts_match_rust(backend, monkeypatch, cased):
    import laya.wordpiece as wordpiece

    b = backend
    if cased:
        spec = json.loads(backend.to_str())
        spec["normalizer"]["lowercase"] = False
        spec["normalizer"]["strip_accents"] = False
        b = tokenizers.Tokenizer.from_str(json.dumps(spec))
    monkeypatch.setattr(wordpiece, "CHUNK_CACHE_SIZE", 64)  # the cache fills and is emptied many times
    wp = AsciiWordPiece.for_backend(b)
    covered = 0
    for text in glued_vocabulary_texts(b, 3000, 99 + cased):
        ids = wp.encode(text)
        if ids is not None:
            covered += 1
            assert ids == rust_ids(b, text), repr(text)
    assert covered > 1000
    assert 0 < len(wp.chunks) <= 64


def test_added_tokens_without_a_common_character(backend):
    """No character shared by every added token: each one is looked for (no shortcut)."""
    tok = tokenizers.Tokenizer.from_str(backend.to_str())
    tok.add_tokens([tokenizers.AddedToken("zorblax", normalized=True)])
    wp = AsciiWordPiece.for_backend(tok)
    assert wp is not None and wp.added_gate is None
    assert wp.encode("a zorblax b") is None and wp.encode("a [SEP] b") is None
    assert wp.encode("a zorbla x b") == tok.encode("a zorbla x b", add_special_tokens=False).ids
    assert AsciiWordPiece.for_backend(backend).added_gate == "["


BENCH_WORDS = ("the customer wrote that order arrived late and invoice shows charge they do not recognise please "
               "help fix account login because app keeps crashing after update support has replied for days we "
               "want refund or replacement today thanks my password reset link goes to old email").split()


def test_benchmark_like_texts_take_the_python_path_with_tok_ids(tok):
    """bench_latency's StateMaker texts (words, a full stop every few) and bench_overhead's tickets: all
    covered by the Python path, ids equal to tok(...), cold and from the chunk cache."""
    view = tokenizer_view(tok)
    rng = random.Random(5)
    texts = []
    for n in (20, 60, 120, 450):
        words = [rng.choice(BENCH_WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(n)]
        texts.append(" ".join(words))
    texts += ["Hello support team, I was charged twice for the Pro plan this month and both payments show on my "
              "card statement. My order #482913 was marked as delivered on March 3 but nothing arrived. I am "
              "using version 2.14.3 on a laptop. My account number is AC-48213 in case you need it. Could you "
              "please refund the duplicate charge as soon as possible? Thanks, Priya",
              "Exports stop at exactly 10,000 rows and the file is cut off. Since yesterday's update the app "
              "crashes every time I open the settings page; error code E503."]
    for text in texts:
        assert view.ascii.encode(text) is not None
    for _ in range(2):
        assert encode_many(tok, texts) == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        assert [encode_many(tok, [t])[0] for t in texts] == encode_many(tok, texts)
