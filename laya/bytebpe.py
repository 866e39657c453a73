"""Plain-ASCII text through a byte-level BPE tokenizer (GPT-2 style, ModernBERT's kind), in Python: the Rust
tokenizer's exact ids, faster.

For a tokenizer.json of exactly this shape -- no normaliser or a plain NFC / NFKC one (the identity on ASCII
text; GPT-NeoX-style tokenizers such as ModernBERT's carry NFC), a ByteLevel pre-tokeniser without prefix space
and with its regex, a BPE model without dropout, subword prefix/suffix, byte fallback or ignore_merges --
and a text made only of printable ASCII plus tab, newline and carriage return, the Rust pipeline reduces to:

  * pre-tokeniser: GPT-2's regex ('s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+),
    where on such text \\p{L} is [A-Za-z], \\p{N} is [0-9] and \\s is tab, newline, CR and space; each
    piece's bytes are then mapped to GPT-2's printable byte alphabet (space becomes "Ġ" and so on);
  * BPE: the piece's characters, merged pair by pair, always the adjacent pair of lowest merge rank first
    (the leftmost among equals), until no adjacent pair has a merge.

`AsciiByteBPE` does that with one regex pass and a per-piece cache (the merges run once per distinct piece),
and answers None for any text it does not cover -- non-ASCII, other control characters, text containing an
added token (Rust splits those out first), or a character the vocabulary lacks -- so callers send those
texts to the Rust tokenizer, as for laya.wordpiece. It also answers None for a text with more new pieces
than a few (Python merges are slow: Rust is faster for such a text), after merging a few of them so that
later texts find them in the cache. tests/test_bytebpe.py checks the ids against the Rust
tokenizer on generated texts.
"""

from __future__ import annotations

import json
import re
from itertools import chain, repeat
from typing import Any

from .wordpiece import ascii_covered

_PIECES = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\t\n\r A-Za-z0-9]+|[\t\n\r ]+(?![^\t\n\r ])"
                     r"|[\t\n\r ]+")
PIECE_CACHE_SIZE = 16384  # pieces and their ids; the cache is emptied when it is full
WARM_PIECES = 2  # new pieces merged (and remembered) for a text left to Rust because it has too many
_NEVER = 1 << 62
# Unicode normal forms leave ASCII text as it is, so they change nothing on the texts covered here
ASCII_IDENTITY_NORMALIZERS = ({"type": "NFC"}, {"type": "NFKC"})


def byte_alphabet() -> dict:
    """GPT-2's byte -> printable character map (the one ByteLevel uses), for the ASCII bytes."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    mapping, extra = {}, 0
    for b in range(256):
        if b in kept:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return {b: mapping[b] for b in range(128)}


class AsciiByteBPE:
    """`encode(text) -> ids | None` for one qualifying tokenizer (see `for_backend`)."""

    __slots__ = ("vocab", "ranks", "added", "table", "pieces")

    def __init__(self, vocab: dict, ranks: dict, added: tuple):
        self.vocab = vocab
        self.ranks = ranks  # (left, right) -> merge rank
        self.added = added  # added-token contents (matched in the raw text: there is no normaliser)
        self.table = byte_alphabet()  # str.translate table for ASCII
        self.pieces: dict = {}  # piece -> tuple of ids

    @classmethod
    def for_backend(cls, backend: Any) -> "AsciiByteBPE | None":
        """The fast path for a `tokenizers.Tokenizer`, or None when its pipeline is not exactly the one above
        (or anything about it cannot be read)."""
        try:
            spec = json.loads(backend.to_str())
            pre, model = spec.get("pre_tokenizer"), spec.get("model")
            if spec.get("normalizer") not in (None, *ASCII_IDENTITY_NORMALIZERS):
                return None
            if not isinstance(pre, dict) or pre.get("type") != "ByteLevel" or pre.get("add_prefix_space") is not False \
                    or pre.get("use_regex", True) is not True or set(pre) - {"type", "add_prefix_space", "trim_offsets",
                                                                             "use_regex"}:
                return None
            if not isinstance(model, dict) or model.get("type") != "BPE" or model.get("dropout") is not None \
                    or model.get("continuing_subword_prefix") not in (None, "") \
                    or model.get("end_of_word_suffix") not in (None, "") or model.get("byte_fallback") \
                    or model.get("ignore_merges"):
                return None
            vocab = model["vocab"]
            if not isinstance(vocab, dict) or vocab != backend.get_vocab(with_added_tokens=False):
                return None  # (an added token may reuse a vocabulary string; the model's own table rules)
            ranks = {}
            for rank, merge in enumerate(model["merges"]):
                left, right = merge.split(" ") if isinstance(merge, str) else merge
                if left not in vocab or right not in vocab or left + right not in vocab:
                    return None
                ranks[left, right] = rank  # a repeated pair keeps its last rank, as Rust's map does
            contents = {token["content"] for token in spec.get("added_tokens") or ()}
            if "" in contents:
                return None
            # a token holding a shorter one needs no search of its own (e.g. ModernBERT's runs of spaces)
            added = tuple(sorted(t for t in contents if not any(o != t and o in t for o in contents)))
            return cls(vocab, ranks, added)
        except Exception:  # noqa: BLE001 - an unexpected layout: no fast path, Rust does everything
            return None

    def encode(self, text: str) -> list[int] | None:
        """The ids `Tokenizer.encode(text, add_special_tokens=False)` gives, or None when not covered."""
        if not ascii_covered(text):
            return None
        for token in self.added:  # an added token would be split out first: leave such text to Rust
            if token in text:
                return None
        pieces = _PIECES.findall(text)
        found = list(map(self.pieces.get, pieces))
        if None in found:
            misses = [i for i, ids in enumerate(found) if ids is None]
            # Python merges cost about what Rust takes for a few words: with many new pieces Rust is faster.
            # Such a text still teaches the cache a few pieces, so a stream of them warms it up.
            declined = len(misses) > 2 + len(pieces) // 8
            for i in misses[:WARM_PIECES] if declined else misses:
                ids = found[i] = self.piece_ids(pieces[i])
                if ids is None:
                    return None
            if declined:
                return None
        return list(chain.from_iterable(found))

    def piece_ids(self, piece: str) -> tuple | None:
        """BPE merges of one pre-tokeniser piece (remembered), or None when the vocabulary lacks a character."""
        parts = list(piece.translate(self.table))
        rank = self.ranks.get
        while len(parts) > 1:  # the adjacent pair of lowest rank, the leftmost among equals (Rust's order)
            ranks = list(map(rank, zip(parts, parts[1:]), repeat(_NEVER)))
            best = min(ranks)
            if best == _NEVER:
                break
            at = ranks.index(best)
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        vocab = self.vocab
        if any(p not in vocab for p in parts):
            return None
        ids = tuple(vocab[p] for p in parts)
        cache = self.pieces
        if len(cache) >= PIECE_CACHE_SIZE:
            cache.clear()
        cache[piece] = ids
        return ids
