"""Plain-ASCII text through a BERT WordPiece tokenizer, in Python: the Rust tokenizer's exact ids, faster.

For a tokenizer.json of exactly this shape -- BertNormalizer, BertPreTokenizer, WordPiece model -- and a
text made only of printable ASCII plus tab, newline and carriage return, the Rust pipeline reduces to:

  * normaliser: control characters are removed (there are none), tab/newline/CR become spaces, the text
    is lower-cased when `lowercase` is set; Chinese-character spacing and accent stripping change no
    ASCII character;
  * pre-tokeniser: split on whitespace (dropped) and on each ASCII punctuation character (kept alone),
    i.e. the words are the runs of letters and digits and the single punctuation characters;
  * WordPiece: a word longer than `max_input_chars_per_word` is [UNK]; otherwise greedy longest match
    from the left, continuation pieces carrying the `##` prefix, and [UNK] for the whole word when some
    position matches nothing.

Rust's `NormalizedString` keeps per-character alignments through all of this, which costs far more than
the lookups themselves (about 5x on a 100-word ticket). `AsciiWordPiece` does the same three steps with
str methods and dict lookups, and answers None for any text it does not cover -- non-ASCII, other control
characters, or text containing an added token (those are split out before normalisation by the Rust
side) -- so callers send those to the Rust tokenizer.

The common case costs one `str.split()` and one dict lookup per whitespace-separated chunk: a chunk that
is a run of letters/digits, or a single punctuation character, is exactly one pre-tokeniser word, so when
it is a vocabulary entry its id is the answer (`words`, the vocabulary restricted to such entries, makes
that one lookup; full stops and commas get spaces around them first, which changes no word). Every other
chunk -- punctuation attached to a word ("#4829", "don't"), or a word WordPiece splits into pieces --
goes through the regex and the greedy split once, and its ids are kept in a bounded per-chunk cache.
tests/test_wordpiece.py checks the ids against the Rust tokenizer on generated texts.
"""

from __future__ import annotations

import json
import re
from typing import Any

# After lower-casing and with whitespace as the separator: runs of letters/digits, or one ASCII
# punctuation character (Rust's char::is_ascii_punctuation: 0x21-0x2F, 0x3A-0x40, 0x5B-0x60, 0x7B-0x7E).
_WORDS = re.compile(r"[0-9A-Za-z]+|[!-/:-@\[-`{-~]")
# Anything but printable ASCII, tab, newline and carriage return: not covered, Rust tokenises it.
_NOT_COVERED = re.compile(r"[^\t\n\r -~]")


def ascii_covered(text: str) -> bool:
    """Whether `text` is only printable ASCII, tab, newline and CR: the texts the Python paths (this module
    and laya.bytebpe) tokenise; anything else goes to Rust. isascii is a flag check and isprintable one C
    loop: only texts with tabs, newlines or other control characters need the regex."""
    return text.isascii() and (text.isprintable() or _NOT_COVERED.search(text) is None)


# Spaces around a punctuation character change no pre-tokeniser word (it is a word of its own either way).
_PADDED = {".": " . ", ",": " , "}
CHUNK_CACHE_SIZE = 16384  # chunks whose ids took the slow path; the cache is emptied when it is full


class AsciiWordPiece:
    """`encode(text) -> ids | None` for one qualifying tokenizer (see `for_backend`)."""

    __slots__ = ("vocab", "words", "unk_id", "prefix", "max_chars", "lowercase", "added", "added_gate", "chunks")

    def __init__(self, vocab: dict, unk_id: int, prefix: str, max_chars: int, lowercase: bool, added: tuple):
        self.vocab = vocab
        # the entries a whitespace-separated chunk can be as one pre-tokeniser word: ASCII letters/digits
        # only, or one ASCII punctuation character (never e.g. "##s" or "[unused0]", which are several words)
        self.words = {piece: i for piece, i in vocab.items() if piece.isascii()
                      and (piece.isalnum() or (len(piece) == 1 and _WORDS.fullmatch(piece) is not None))}
        self.unk_id = unk_id
        self.prefix = prefix
        self.max_chars = max_chars
        self.lowercase = lowercase
        self.added = added  # lower-cased added-token strings (raw and normalised forms)
        # a character every added token contains ("[" for BERT's): a text without it holds none of them
        common = set(added[0]).intersection(*added[1:]) if added else set()
        self.added_gate = min(common) if common else None
        self.chunks: dict = {}  # chunk -> tuple of ids, for chunks that are not one `words` entry

    @classmethod
    def for_backend(cls, backend: Any) -> "AsciiWordPiece | None":
        """The fast path for a `tokenizers.Tokenizer`, or None when its pipeline is not exactly
        BertNormalizer + BertPreTokenizer + WordPiece (or anything about it cannot be read)."""
        try:
            spec = json.loads(backend.to_str())
            normalizer, pre, model = spec.get("normalizer"), spec.get("pre_tokenizer"), spec.get("model")
            if not isinstance(normalizer, dict) or normalizer.get("type") != "BertNormalizer":
                return None
            if pre != {"type": "BertPreTokenizer"}:
                return None
            if not isinstance(model, dict) or model.get("type") != "WordPiece":
                return None
            vocab = backend.get_vocab(with_added_tokens=False)
            unk = model.get("unk_token")
            prefix = model.get("continuing_subword_prefix")
            max_chars = model.get("max_input_chars_per_word")
            if unk not in vocab or not isinstance(prefix, str) or isinstance(max_chars, bool) \
                    or not isinstance(max_chars, int) or max(map(len, vocab), default=0) > max_chars:
                return None  # (encode takes a whole-word vocabulary hit as never too long)
            lowercase = normalizer.get("lowercase")
            if not isinstance(lowercase, bool):
                return None
            added = set()
            for token in spec.get("added_tokens") or ():
                content = token["content"]
                added.add(content.lower())
                if token.get("normalized"):
                    added.add(backend.normalizer.normalize_str(content).lower())
            # An added token with whitespace inside is matched by Rust in the NORMALISED text (tab, newline
            # and CR already spaces); encode() checks the raw text, so such tokenizers get no fast path.
            if "" in added or any(any(c.isspace() for c in token) for token in added):
                return None
            return cls(compact_vocab(vocab), vocab[unk], prefix, max_chars, lowercase, tuple(added))
        except Exception:  # noqa: BLE001 - an unexpected layout: no fast path, Rust does everything
            return None

    def encode(self, text: str) -> list[int] | None:
        """The ids `Tokenizer.encode(text, add_special_tokens=False)` gives, or None when not covered."""
        if not ascii_covered(text):
            return None
        lowered = text.lower()
        gate = self.added_gate
        if gate is None or gate in lowered:
            for token in self.added:  # an added token would be split out first: leave such text to Rust
                if token in lowered:
                    return None
        words = lowered if self.lowercase else text
        for mark in _PADDED:  # the commonest punctuation stands alone (it is one word): far fewer misses
            if mark in words:
                words = words.replace(mark, _PADDED[mark])
        # split() cuts at exactly tab, newline, CR and space here (other whitespace was declined above)
        chunks = words.split()
        whole = list(map(self.words.get, chunks))  # the usual case: every chunk is one vocabulary word ...
        if None not in whole:
            return whole  # type: ignore[return-value]  # ... never too long (checked in for_backend)
        ids: list[int] = []
        cached = self.chunks.get
        done = 0
        while True:  # copy the hits; other chunks (attached punctuation, split words) from the cache
            try:
                miss = whole.index(None, done)
            except ValueError:
                ids.extend(whole[done:])
                return ids
            ids.extend(whole[done:miss])
            chunk = chunks[miss]
            pieces = cached(chunk)
            if pieces is None:
                pieces = self.chunk_ids(chunk)
            ids.extend(pieces)
            done = miss + 1

    def chunk_ids(self, chunk: str) -> tuple:
        """The ids of one whitespace-free chunk (pre-tokeniser words, then WordPiece), remembered."""
        ids: list[int] = []
        get = self.vocab.get
        for word in _WORDS.findall(chunk):
            found = get(word)
            if found is not None:  # a whole vocabulary entry is never too long (checked in for_backend)
                ids.append(found)
            elif len(word) > self.max_chars:
                ids.append(self.unk_id)
            else:
                append_pieces(ids, word, get, self.prefix, self.unk_id)
        pieces = tuple(ids)
        cache = self.chunks
        if len(cache) >= CHUNK_CACHE_SIZE:
            cache.clear()
        cache[chunk] = pieces
        return pieces


def compact_vocab(vocab: dict) -> dict:
    """The same {piece: id} mapping, rebuilt in id order from fresh strings and ints.

    `get_vocab` hands back a dict in hash-map order whose keys and values lie scattered over the heap, so
    every word a text looks up touches its own memory pages. WordPiece vocabularies list the frequent pieces
    first: rebuilt in id order, those entries, key strings and id objects sit together, and a request that
    runs with caches emptied by the model's forward misses on far fewer pages."""
    ids = list(range(max(vocab.values(), default=-1) + 1))  # fresh ints, allocated in order
    return {piece.encode().decode(): ids[i] for piece, i in sorted(vocab.items(), key=lambda item: item[1])}


def append_pieces(ids: list[int], word: str, get: Any, prefix: str, unk_id: int) -> None:
    """WordPiece's greedy longest-match-first split of one word (not a whole vocabulary entry)."""
    pieces = []
    start, n = 0, len(word)
    while start < n:
        end = n
        found = None
        while start < end:
            found = get(word[start:end] if start == 0 else prefix + word[start:end])
            if found is not None:
                break
            end -= 1
        if found is None:
            ids.append(unk_id)
            return
        pieces.append(found)
        start = end
    ids.extend(pieces)
