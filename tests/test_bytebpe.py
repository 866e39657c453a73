"""laya.bytebpe: the Python ASCII byte-level BPE path gives exactly the Rust tokenizer's ids, or declines."""

import json
import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers")

from _rust_tokenizer import rust_backend, rust_ids  # noqa: E402

import laya  # noqa: E402
import laya.bytebpe as bytebpe  # noqa: E402
from laya.bytebpe import AsciiByteBPE  # noqa: E402
from laya.sequence import encode_many, rust_encode, tokenizer_view  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\r")
WORDS = ["refund", "invoice", "charged", "Twice", "don't", "I'm", "we'll", "they've", "'s", "'S", "''", "it's.",
         "x" * 50, "E404", "v1.2.3", "  ", "   ", "\t\t", " \n ", "\r\n", "12345", "1,000.50", "#482913", "AC-48213",
         "naïve", "café", "日本語", "🙂", "\x0b", "\x00", "\x1c", "\x7f", "\u00a0", "[MASK]", "[SEP]", "[sep]"]


@pytest.fixture(scope="module")
def backend(bpe_checkpoint):
    return rust_backend(os.path.join(bpe_checkpoint, "tokenizer", "tokenizer.json"))


@pytest.fixture(scope="module")
def fast(backend):
    bpe = AsciiByteBPE.for_backend(backend)
    assert bpe is not None
    return bpe


def settled(wp, text):
    """wp.encode(text) once the piece cache has warmed: a text with many new pieces is declined a few
    times (each time a few more pieces are learnt) before the Python path takes it."""
    for _ in range(2 + len(text) // bytebpe.WARM_PIECES):
        ids = wp.encode(text)
        if ids is not None:
            return ids
    return None


def generated_texts(backend, n, seed):
    """Random ASCII, word soups with contractions and whitespace runs (some not covered), vocabulary pieces."""
    rng = random.Random(seed)
    vocab = sorted(backend.get_vocab(with_added_tokens=False))
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            yield "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80)))
        elif r < 0.7:
            yield "".join(rng.choice(WORDS) + rng.choice(["", " ", " ", "  ", "\t", "\n", "\r\n", ".", "'s "])
                          for _ in range(rng.randint(0, 20)))
        else:
            yield "".join(rng.choice(vocab).replace("Ġ", " ").replace("Ċ", "\n").replace("ĉ", "\t")
                          + rng.choice(["", " ", "  ", "'", "'ll ", ".\n"]) for _ in range(rng.randint(1, 20)))


def check_generated(backend, wp, n, seed):
    covered = 0
    for text in generated_texts(backend, n, seed):
        ids = settled(wp, text)
        if ids is not None:
            covered += 1
            assert ids == rust_ids(backend, text), repr(text)
    return covered


TEXTS = ["", " ", "  ", "   x", "x   ", "\t\n\r", "a\r\n\r\nb", "Hello support team, I was charged twice!",
         "I'm sure they've said we'll see, it's John's", "IT'S DON'T", "'s's'''s", "x'sy 'tq",
         "Every sync attempt fails with error code E503 after about two minutes... (v2.14.3)",
         "My order #482913 was marked as delivered on March 3 but nothing arrived.",
         "AC-48213 / e-mail: someone@example.com; ~`^|{}[]<>=+*&%$\"'\\", "123456789 0 00 1,000.50",
         "ends with spaces   ", "   starts with spaces", "tabs\tand\nnewlines\r\nhere \t \n"]


@pytest.mark.parametrize("text", TEXTS)
def test_fixed_texts_match_rust(backend, fast, text):
    assert settled(fast, text) == rust_ids(backend, text)
    assert fast.encode(text) == rust_ids(backend, text)  # from the piece cache


def test_many_new_pieces_go_to_rust_while_the_cache_warms(backend):
    wp = AsciiByteBPE.for_backend(backend)
    text = "Hello support team, I was charged twice for the Pro plan this month and both payments show up"
    assert wp.encode(text) is None and len(wp.pieces) == bytebpe.WARM_PIECES  # new: Rust is faster
    assert settled(wp, text) == rust_ids(backend, text)
    text2 = text + " 12345"  # one new piece among many known ones: merged in Python
    assert wp.encode(text2) == rust_ids(backend, text2)


def test_generated_texts_match_rust(backend, monkeypatch):
    monkeypatch.setattr(bytebpe, "PIECE_CACHE_SIZE", 100)  # the cache fills and is emptied many times
    wp = AsciiByteBPE.for_backend(backend)
    assert check_generated(backend, wp, 6000, 21) > 2000
    assert 0 < len(wp.pieces) <= 100


@pytest.mark.parametrize("text", ["café au lait", "日本語のテキスト", "emoji 🙂", "tab\x0bvertical", "nul\x00byte",
                                  "del\x7f", "fs\x1csep", "\u00a0nbsp", "a [SEP] b", "[MASK]",
                                  "[PAD][UNK][CLS]"])
def test_declines_text_it_does_not_cover(fast, text):
    assert settled(fast, text) is None


def trained(vocab_size, corpus, added=()):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[MASK]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    if added:
        tok.add_tokens(list(added))
    return tok


def ticket_corpus(n, seed):
    rng = random.Random(seed)
    words = ["refund", "invoice", "charged", "twice", "order", "arrived", "login", "password", "crash", "update",
             "can't", "won't", "I'm", "we've", "E404", "2.14.3", "#482913", "10,000", "(see", "below)", "e-mail",
             "@support", "Hello", "Thanks", "URGENT", "!!!", "...", "\n\n", "\t"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) for _ in range(n)]


def test_larger_trained_vocabulary_matches_rust():
    """A bigger vocabulary (long merges, whole words, digits, punctuation, whitespace runs)."""
    tok = trained(1500, ticket_corpus(3000, 1))
    wp = AsciiByteBPE.for_backend(tok)
    assert wp is not None
    assert check_generated(tok, wp, 3000, 22) > 1000
    for text in ticket_corpus(300, 2):
        assert settled(wp, text) == tok.encode(text, add_special_tokens=False).ids


def test_added_whitespace_tokens_decline_only_texts_holding_them():
    """ModernBERT's tokenizer has added tokens made of spaces: a text holding one goes to Rust."""
    tok = trained(600, ticket_corpus(500, 3), added=["  ", "|||EMAIL|||"])
    wp = AsciiByteBPE.for_backend(tok)
    assert wp is not None
    assert wp.encode("two  spaces") is None and wp.encode("mail |||EMAIL||| me") is None
    for text in ("one space each", "tab\there", "a |||EMAI L", " lead and trail "):
        assert settled(wp, text) == tok.encode(text, add_special_tokens=False).ids
    assert check_generated(tok, wp, 1500, 23) > 300


def respec(backend, change):
    spec = json.loads(backend.to_str())
    change(spec)
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


@pytest.mark.parametrize("form", ["NFC", "NFKC"])
def test_nfc_and_nfkc_normalisers_keep_the_fast_path(backend, form):
    # the identity on ASCII: the same ids as Rust with the normaliser in place; non-ASCII still declined
    normalised = respec(backend, lambda s: s.update(normalizer={"type": form}))
    wp = AsciiByteBPE.for_backend(normalised)
    assert wp is not None
    assert check_generated(normalised, wp, 800, 31) > 200
    assert wp.encode("caf\u00e9") is None and wp.encode("\ufb01le") is None


@pytest.mark.parametrize("change", [
    lambda s: s.update(normalizer={"type": "NFD"}),
    lambda s: s.update(normalizer={"type": "Lowercase"}),
    lambda s: s["pre_tokenizer"].update(add_prefix_space=True),
    lambda s: s["pre_tokenizer"].update(use_regex=False),
    lambda s: s.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [s["pre_tokenizer"]]}),
    lambda s: s.update(pre_tokenizer={"type": "Whitespace"}),
    lambda s: s["model"].update(dropout=0.1),
    lambda s: s["model"].update(ignore_merges=True),
    lambda s: s["model"].update(byte_fallback=True),
    lambda s: s["model"].update(end_of_word_suffix="</w>"),
], ids=["nfd", "lowercase", "prefix_space", "no_regex", "sequence", "whitespace", "dropout", "ignore_merges",
        "byte_fallback", "word_suffix"])
def test_other_pipelines_get_no_fast_path(backend, change):
    assert AsciiByteBPE.for_backend(respec(backend, change)) is None


def test_subword_prefix_gets_no_fast_path(backend):
    """(Rust cannot even load this vocabulary with a prefix, so a stand-in hands over the spec.)"""
    spec = json.loads(backend.to_str())
    spec["model"]["continuing_subword_prefix"] = "##"

    class StandIn:
        def to_str(self):
            return json.dumps(spec)

        def get_vocab(self, with_added_tokens=True):
            return backend.get_vocab(with_added_tokens=with_added_tokens)

    assert AsciiByteBPE.for_backend(StandIn()) is None
    spec["model"]["continuing_subword_prefix"] = None
    assert AsciiByteBPE.for_backend(StandIn()) is not None


def test_wordpiece_tokenizer_gets_no_bpe_path(tok):
    assert AsciiByteBPE.for_backend(tokenizer_view(tok).backend) is None


def test_encode_many_uses_it_and_mixes_paths_in_order(bpe_checkpoint):
    bpe_tok = laya.load(bpe_checkpoint, device="cpu").tok
    view = tokenizer_view(bpe_tok)
    assert isinstance(view.ascii, AsciiByteBPE)
    texts = ["plain ascii text", "café crème", "", "a [SEP] b", "UPPER case 123", "émoji 🙂 here", "last one.",
             "I'm  here\n\n", "日本語"]
    assert encode_many(bpe_tok, texts) == rust_encode(bpe_tok, view, texts)
    assert encode_many(bpe_tok, texts) == [bpe_tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert [encode_many(bpe_tok, [t])[0] for t in texts] == encode_many(bpe_tok, texts)


def test_added_tokens_holding_shorter_ones_are_not_searched_again():
    tok = trained(600, ticket_corpus(500, 3), added=["  ", "   ", "    ", "|||IP|||", "|||IP|||x", "<|pad|>"])
    wp = AsciiByteBPE.for_backend(tok)
    assert wp.added == ("  ", "<|pad|>", "[CLS]", "[MASK]", "[PAD]", "[SEP]", "|||IP|||")
    for text in ("a    b", "x |||IP|||x y", "<|pad|>"):
        assert settled(wp, text) is None
    for text in ("a <|pad b", "|||IP|| x", "one space each"):
        assert settled(wp, text) == tok.encode(text, add_special_tokens=False).ids
