"""Script and language evidence for routing a state to the English or the multilingual checkpoint.

Torch-free and cheap: the Router calls `analyse` before any forward pass. The question it answers is
narrow -- "is this safe for the English checkpoint?" -- because the English checkpoint collapses on other
languages while staying confident. The rules are those of the published laya 0.4.15 (compat §4):
a whole-state verdict, then a segment stage (one foreign line in a mostly-English state) and a value
stage (one foreign field in a structured state). Input is never NFC-normalised: a decomposed accent is a
combining mark, not a diacritic letter.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .lang_tables import (COLLISION_WORDS, ENGLISH_ONLY_WORDS, LANGUAGE_ORDER, LATIN_RANGES, NEWER_LETTER_RANGES,
                          NON_ENGLISH_LETTERS, NORDIC_MARKERS, SCRIPT_RANGES, SCRIPTS, SHARED_WORDS,
                          SHORT_SWEDISH_MARKERS, STOP_WORDS)

__all__ = ["analyse", "detect_language", "detect_script", "evidence", "guess_latin_language", "is_english",
           "latin_profile", "script_profile", "state_text", "ENGLISH_RESCUE_DIACRITIC_RATE", "NON_EN_DIACRITIC_RATE",
           "NON_LATIN_FRACTION", "NON_LATIN_MIN_FRACTION", "NON_LATIN_MIN_LETTERS", "SCRIPTS", "STOP_WORDS"]

SCAN_CHARS = 4000  # the whole-state text, the segment budget and each value line are cut to this
MAX_DEPTH = 6  # levels below the root that text extraction reads
NON_EN_DIACRITIC_RATE = 0.02
ENGLISH_RESCUE_DIACRITIC_RATE = 0.06
NON_LATIN_FRACTION = 0.2
NON_LATIN_MIN_FRACTION = 0.1  # ... with at least NON_LATIN_MIN_LETTERS non-Latin letters
NON_LATIN_MIN_LETTERS = 10
MIN_WORDS = 4  # fewer words name no language (except the short-Swedish markers)
SHOUTED_LONG_WORD = 5  # a shouted text needs a word this long ...
SHOUTED_STOP_WORD = 4  # ... and accents or a stop word at least this long
CAPS_RUN_KEEP = 5  # a capitals run this long is prose, so no run is blanked as an acronym
VALUE_MIN_LINE = 7
VALUE_MIN_LETTERS = 10
PATH_KEY_MAX_CHARS = 128
PATH_KEY_MAX_BITS = 63

_IDENTIFIER = re.compile(r"(?<![\w-])[\w-]++(?:[.@][\w-]++)+")  # possessive: no backtracking inside a word
_CODE = re.compile(r"[=;{}\[\]]|\w\(")
_JOINED_TOKEN = re.compile(r"[^\W_][._/\\][^\W_]")
_SCRIPT_ORDER = sorted(SCRIPT_RANGES)
_SCRIPT_STARTS = [first for first, _, _ in _SCRIPT_ORDER]
_NEWER_STARTS = [first for first, _ in NEWER_LETTER_RANGES]
_WORD = re.compile(r"[^\W\d_]+")  # letters, and other numerics (superscripts...): `_letter_runs` splits those out
_NEWER = "".join(f"{chr(a)}-{chr(b)}" for a, b in NEWER_LETTER_RANGES)
_HAS_NEWER = re.compile(f"[{_NEWER}]")
_WORD_OR_NEWER = re.compile(rf"(?:[^\W\d_]|[{_NEWER}])+")  # slower: only for texts holding a newer letter


# ---- text extraction (R-LANG-6, R-LANG-4 paths) -------------------------------------------------------------

def _child_path(path: list | None, key: Any) -> list | None:
    """The path one level down; None once a key is not a short str or a 63-bit int (keys are never stringified)."""
    if path is None:
        return None
    if isinstance(key, str) and len(key) <= PATH_KEY_MAX_CHARS:
        return path + [key]
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() <= PATH_KEY_MAX_BITS:
        return path + [key]
    return None


def _leaves(state: Any) -> list[tuple[str, list | None]]:
    """(text, path) of every string leaf read, depth first in insertion order; mapping keys are not text."""
    out: list[tuple[str, list | None]] = []

    def walk(node: Any, depth: int, path: list | None) -> None:
        if depth > MAX_DEPTH:
            return
        if isinstance(node, str):
            out.append((node, path))
        elif isinstance(node, (bytes, bytearray)):
            try:
                out.append((bytes(node).decode("utf-8"), path))
            except UnicodeDecodeError:
                pass
        elif isinstance(node, Mapping):
            for key, value in node.items():
                walk(value, depth + 1, _child_path(path, key))
        elif isinstance(node, (list, tuple)):
            for index, value in enumerate(node):
                walk(value, depth + 1, _child_path(path, index))

    walk(state, 0, [])
    return out


def _joined(texts: list[str], max_chars: int) -> str:
    parts, size = [], 0
    for text in texts:
        parts.append(text)
        size += len(text) + 1
        if size > max_chars:
            break
    return " ".join(parts)[:max_chars]


def state_text(state: Any, max_chars: int = SCAN_CHARS) -> str:
    """The state's string leaves joined with single spaces, cut to `max_chars` (keys ignored)."""
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
        raise ValueError(f"max_chars must be a non-negative integer, got {max_chars!r}")
    return _joined([text for text, _ in _leaves(state)], max_chars)


# ---- letters and scripts (R-LANG-7 .. R-LANG-10) -------------------------------------------------------------

def _alpha(text: str) -> int:
    return sum(n for ch, n in Counter(text).items() if ch.isalpha())


def _in_ranges(cp: int, starts: list[int], ranges: tuple) -> tuple | None:
    i = bisect_right(starts, cp) - 1
    return ranges[i] if i >= 0 and cp <= ranges[i][1] else None


@lru_cache(maxsize=8192)
def letter_script(ch: str) -> str | None:
    """'latin', a named script, 'other' for letters of unlisted or newer scripts, None for non-letters."""
    cp = ord(ch)
    if not ch.isalpha() and not (unicodedata.category(ch) == "Cn"
                                 and _in_ranges(cp, _NEWER_STARTS, NEWER_LETTER_RANGES)):
        return None
    if cp < 0x02B0 or any(first <= cp <= last for first, last in LATIN_RANGES):
        return "latin"
    found = _in_ranges(cp, _SCRIPT_STARTS, _SCRIPT_ORDER)
    return found[2] if found else "other"


def _script_counts(text: str) -> dict[str, int]:
    """Letters per script, in order of first appearance."""
    counts: dict[str, int] = {}
    for ch, n in Counter(text).items():  # distinct characters in order of first appearance
        script = letter_script(ch)
        if script is not None:
            counts[script] = counts.get(script, 0) + n
    return counts


def _profile(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    order = (["latin"] if "latin" in counts else []) + [s for s in counts if s != "latin"]
    return {script: counts[script] / total for script in order} if total else {}


def script_profile(text: Any) -> dict:
    """Fraction of letters per script: 'latin' first when present, the others in order of first appearance."""
    return _profile(_script_counts(text if isinstance(text, str) else state_text(text)))


def _dominant(counts: dict[str, int]) -> str:
    if not counts:
        return "unknown"
    top = max(counts.values())
    tied = [script for script, n in counts.items() if n == top]
    return next((s for s in tied if s != "latin"), "latin")  # a non-Latin script wins a tie


def detect_script(text: Any) -> str:
    """The dominant script of a text ('unknown' without letters), before any promotion."""
    return _dominant(_script_counts(text if isinstance(text, str) else state_text(text)))


def _has_non_latin_word(text: str, counts: dict[str, int]) -> bool:
    """Two or more consecutive letters of one named non-Latin script, not starting with a capital."""
    if all(script in ("latin", "other") for script in counts):
        return False
    run_script, run_len, capital = None, 0, False
    for ch in text:
        if unicodedata.category(ch).startswith("M"):
            continue  # combining marks never split a run
        script = letter_script(ch)
        if script is None or script in ("latin", "other"):
            run_script, run_len = None, 0
            continue
        if script == run_script:
            run_len += 1
        else:
            run_script, run_len, capital = script, 1, ch.isupper()
        if run_len >= 2 and not capital:
            return True
    return False


def _non_latin_carries(profile: dict, text: str) -> bool:
    """R-LANG-10 (b): the non-Latin share is large, or moderate with enough non-Latin letters."""
    fraction = round(1 - profile.get("latin", 0.0), 4)
    letters = round(fraction * _alpha(text))
    return fraction >= NON_LATIN_FRACTION or (fraction >= NON_LATIN_MIN_FRACTION and letters >= NON_LATIN_MIN_LETTERS)


# ---- the Latin language guess (R-LANG-11 .. R-LANG-14) --------------------------------------------------------

@dataclass(frozen=True)
class _Guess:
    language: str | None
    english_hits: int
    rate: float
    looks_non_english: bool
    words: tuple[str, ...]
    reason: str


def _word_pattern(text: str) -> re.Pattern:
    """_WORD, or the slower pattern that also takes newer letters when the text may hold one (none below U+1C89)."""
    return _WORD_OR_NEWER if text and max(text) >= "\u1c89" and _HAS_NEWER.search(text) else _WORD


def _split_letters(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The runs of letters inside a word match that also holds other numerics (superscripts, fractions...)."""
    spans, first = [], None
    for i in range(start, end):
        if letter_script(text[i]) is not None:
            first = i if first is None else first
        elif first is not None:
            spans.append((first, i))
            first = None
    return spans + ([(first, end)] if first is not None else [])


def _match_letters(text: str, m: re.Match) -> list[tuple[int, int]]:
    """The letter runs of one word match: itself, unless it also holds other numerics."""
    return [m.span()] if m.group().isalpha() else _split_letters(text, m.start(), m.end())


def _letter_runs(text: str, pattern: re.Pattern | None = None) -> list[tuple[int, int]]:
    """Spans of the maximal runs of letters (R-LANG-7's letters: no digits, underscores or other numerics);
    `pattern`: `_word_pattern(text)` when the caller has it."""
    return [span for m in (pattern or _word_pattern(text)).finditer(text) for span in _match_letters(text, m)]


def _words_and_rate(text: str) -> tuple[list[str], float]:
    lowered = _IDENTIFIER.sub(" ", text).replace("İ", "i").lower()
    accented = sum(n for ch, n in Counter(lowered).items() if ch in NON_ENGLISH_LETTERS)
    rate = accented / len(lowered) if lowered else 0.0
    pattern = _word_pattern(lowered)
    if pattern is _WORD:  # the common case at C speed: runs that are all letters as found
        words = _WORD.findall(lowered)
        if all(map(str.isalpha, words)):
            return words, rate
    return [lowered[a:b] for a, b in _letter_runs(lowered, pattern)], rate


def _score(counts: Counter, language: str) -> int:
    return sum(1 if w in COLLISION_WORDS else counts[w] for w in STOP_WORDS[language].intersection(counts))


def _best_evidenced(counts: Counter) -> tuple[str | None, int]:
    """The highest-scoring language with a matched word of its own list only (earlier language on ties)."""
    best, best_score = None, 0
    for language in LANGUAGE_ORDER:
        matched = STOP_WORDS[language].intersection(counts)
        if matched - SHARED_WORDS:
            score = _score(counts, language)
            if score > best_score:
                best, best_score = language, score
    return best, best_score


def _english_rescue(distinct: set, rate: float) -> bool:
    accented = sum(1 for w in distinct if any(ch in NON_ENGLISH_LETTERS for ch in w))
    return rate < ENGLISH_RESCUE_DIACRITIC_RATE and len(distinct & ENGLISH_ONLY_WORDS) >= 2 and accented <= 1


def _guess(text: str) -> _Guess:
    words, rate = _words_and_rate(text)
    non_english = rate >= NON_EN_DIACRITIC_RATE
    counts = Counter(words)
    distinct = set(counts)
    nordic = bool(distinct & NORDIC_MARKERS) and not distinct & ENGLISH_ONLY_WORDS
    if 2 <= len(words) <= 3 and distinct & SHORT_SWEDISH_MARKERS:
        return _Guess("sv", 0, rate, non_english, tuple(words), "short_swedish")
    en = _score(counts, "en")
    if len(words) < MIN_WORDS:
        return _Guess(None, en, rate, non_english or nordic, tuple(words), "insufficient_words")
    language = _choose(words, counts, en, non_english, rate)
    reason = "language_evidence" if language else "no_language_evidence"
    return _Guess(language, en, rate, non_english or (language is None and nordic), tuple(words), reason)


def _choose(words: list[str], counts: Counter, en: int, non_english: bool, rate: float) -> str | None:
    """R-LANG-13's five rules, first that applies."""
    best, score = _best_evidenced(counts)
    if best is not None and score >= max(2, en + 2):
        return best
    if best == "sv" and "inte" in counts and "kan" in counts and words[0] in ("kan", "jag", "vi") and en <= 1:
        return "sv"
    if best is not None and non_english and score >= max(2, en):
        return best
    if en > 0 and (not non_english or _english_rescue(set(counts), rate)):
        return "en"
    return None


def latin_profile(text: Any) -> dict:
    """The Latin language guess: language, english_hits, diacritic_rate (unrounded), looks_non_english."""
    g = _guess(text if isinstance(text, str) else state_text(text))
    return {"language": g.language, "english_hits": g.english_hits, "diacritic_rate": g.rate,
            "looks_non_english": g.looks_non_english}


def guess_latin_language(text: Any) -> str | None:
    return latin_profile(text)["language"]


# ---- all-caps handling and the whole-text verdict (R-LANG-15, R-LANG-16) ---------------------------------------

def _is_shouted(text: str) -> bool:
    return any(ch.isupper() for ch in text) and not any(ch.islower() for ch in text)


def _shouted_evidence(g: _Guess, language: str) -> bool:
    if not any(len(w) >= SHOUTED_LONG_WORD for w in g.words):
        return False
    stops = STOP_WORDS[language]
    return g.rate >= NON_EN_DIACRITIC_RATE or any(len(w) >= SHOUTED_STOP_WORD and w in stops for w in g.words)


def _caps_runs(text: str) -> list[tuple[int, int]]:
    runs = []
    for m in _word_pattern(text).finditer(text):
        if not m.group().isupper():  # (every letter upper implies isupper: most words leave here at C speed)
            continue
        runs += [(a, b) for a, b in _match_letters(text, m) if b - a >= 2 and all(ch.isupper() for ch in text[a:b])]
    return runs


def _blank(text: str, runs: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for a, b in runs:
        out += [text[last:a], " "]
        last = b
    return "".join(out) + text[last:]


@dataclass(frozen=True)
class _Verdict:
    script: str
    profile: dict
    language: str | None
    is_english: bool
    rate: float
    non_latin_fraction: float
    reason: str
    words: int = 0
    non_latin_word: bool = False

    @property
    def undecided(self) -> bool:
        return self.language is None


def _caps_checked(text: str, g: _Guess) -> tuple[str | None, str]:
    """(language, reason) after R-LANG-15, for a guess that named a non-English language."""
    if _is_shouted(text):
        return (g.language, g.reason) if _shouted_evidence(g, g.language) else (None, "caps_veto")
    runs = _caps_runs(text)
    if runs and all(b - a < CAPS_RUN_KEEP for a, b in runs):
        return _guess(_blank(text, runs)).language, "caps_filtered"
    return g.language, g.reason


def _verdict(text: str) -> _Verdict:
    """The whole-text verdict of §4.4-4.7 on one string."""
    counts = _script_counts(text)
    profile = _profile(counts)
    if not profile:
        return _Verdict("unknown", profile, None, True, 0.0, 0.0, "no_letters")
    non_latin_fraction = round(1 - profile.get("latin", 0.0), 4)
    non_latin_word = _has_non_latin_word(text, counts)
    script = _dominant(counts)
    carried = _non_latin_carries(profile, text)
    if script == "latin" and non_latin_word and carried:
        script = max((s for s in profile if s != "latin"), key=profile.get)
    if script != "latin":
        return _Verdict(script, profile, None, False, 0.0, non_latin_fraction, "non_latin_script",
                        non_latin_word=non_latin_word)
    g = _guess(text)
    language, reason = g.language, g.reason
    if language not in (None, "en") and not carried:
        language, reason = _caps_checked(text, g)
    english = language == "en" or (language is None and not g.looks_non_english)
    if language is None and not english:
        reason = "non_english_markers"
    return _Verdict("latin", profile, language, english, g.rate, non_latin_fraction, reason, len(g.words),
                    non_latin_word)


# ---- segment and value stages (R-LANG-17, R-LANG-18) ----------------------------------------------------------

def _is_code_or_blank(line: str) -> bool:
    return not line.strip() or _CODE.search(line) is not None


def _prose_language(line: str) -> str | None:
    """The non-English language a prose line names (R-LANG-17), or None."""
    if _is_code_or_blank(line):
        return None
    kept = " ".join(token for token in line.split() if not _JOINED_TOKEN.search(token))
    shouted = _is_shouted(kept)
    if not shouted:
        kept = _blank(kept, _caps_runs(kept))
    g = _guess(kept)
    if len(g.words) < MIN_WORDS or g.language in (None, "en"):
        return None
    if shouted and not _shouted_evidence(g, g.language):
        return None
    return g.language if len(STOP_WORDS[g.language].intersection(g.words)) >= 2 else None


def _source(index: int, path: list | None, line: int) -> dict:
    return {"leaf_index": index, "path": None if path is None else list(path), "line": line}


def _segment_stage(leaves: list[tuple[str, list | None]]) -> tuple[str, str, dict] | None:
    """(language, stripped line, source) of the first line naming a prose language, in a 4000-character budget."""
    budget = SCAN_CHARS
    for index, (leaf, path) in enumerate(leaves):
        for number, line in enumerate(leaf.split("\n"), 1):
            if budget <= 0:
                return None
            line = line[:budget]
            budget -= len(line)
            language = _prose_language(line)
            if language is not None:
                return language, line.strip(), _source(index, path, number)
    return None




def _value_line(line: str) -> tuple[str, _Verdict] | None:
    """(reason, verdict) when one line of a value reads as non-English (R-LANG-18)."""
    if len(line) < VALUE_MIN_LINE:
        return None
    line = line[:SCAN_CHARS]
    if _is_code_or_blank(line):
        return None
    v = _verdict(line)
    if v.is_english:
        return None
    if v.language not in (None, "en") and _prose_language(line) is not None:
        return "named_value", v
    if v.script != "latin" and v.non_latin_word and _alpha(line) >= VALUE_MIN_LETTERS:
        return "non_latin_value", v
    if v.script == "latin" and v.rate >= NON_EN_DIACRITIC_RATE and v.words >= MIN_WORDS:
        return "diacritic_value", v
    return None


def _leaf_value(leaf: str) -> tuple[str, _Verdict, int] | None:
    """The qualifying line of a leaf with the most letters (first on ties): (reason, verdict, line number)."""
    best, best_alpha = None, -1
    for number, line in enumerate(leaf.split("\n"), 1):
        found = _value_line(line)
        if found is not None:
            alpha = _alpha(line[:SCAN_CHARS])
            if alpha > best_alpha:
                best, best_alpha = (found[0], found[1], number), alpha
    return best


def _value_stage(leaves: list[tuple[str, list | None]]) -> tuple[str, _Verdict, dict] | None:
    """(reason, line verdict, source) of the leaf with the most letters among those with a foreign line."""
    best, best_alpha = None, -1
    for index, (leaf, path) in enumerate(leaves):
        found = _leaf_value(leaf)
        if found is not None:
            alpha = _alpha(leaf[:SCAN_CHARS])
            if alpha > best_alpha:
                best, best_alpha = (found[0], found[1], _source(index, path, found[2])), alpha
    return best


# ---- public entry points ------------------------------------------------------------------------------------

def _result(v: _Verdict) -> dict:
    return {"script": v.script, "script_profile": v.profile, "language": v.language, "is_english": v.is_english,
            "language_undecided": v.undecided, "diacritic_rate": round(v.rate, 4),
            "non_latin_fraction": v.non_latin_fraction, "mixed_segment": None}


def _detect(state: Any) -> tuple[dict, dict]:
    """(result, diagnostic) of the three stages."""
    leaves = _leaves(state)
    v = _verdict(_joined([text for text, _ in leaves], SCAN_CHARS))
    result = _result(v)
    if v.script == "latin" and v.is_english and (len(leaves) > 1 or any("\n" in text for text, _ in leaves)):
        found = _segment_stage(leaves)
        if found is not None:
            language, line, source = found
            result.update(language=language, is_english=False, language_undecided=False, mixed_segment=line)
            return result, {"stage": "segment", "reason": "named_segment", "source": source}
    if result["is_english"] and isinstance(state, (Mapping, list, tuple)):
        found = _value_stage(leaves)
        if found is not None:
            reason, line, source = found
            result.update(language=line.language, is_english=False, language_undecided=line.undecided)
            return result, {"stage": "value", "reason": reason, "source": source}
    return result, {"stage": "whole_state", "reason": v.reason, "source": None}


def analyse(state: Any, *, explain: bool = False) -> dict:
    """Script profile and language verdict of any state (str, bytes, mapping, list; anything else has no text).

    Keys: script, script_profile, language, is_english, language_undecided, diacritic_rate,
    non_latin_fraction, mixed_segment (the stripped foreign line, or None); with explain=True also
    diagnostic = {stage, reason, source}. Never raises and never mutates the state.
    """
    result, diagnostic = _detect(state)
    if explain:
        result["diagnostic"] = diagnostic
    return result


detect_language = analyse


def is_english(state: Any) -> bool:
    """True when the state is safe for the English checkpoint (English, or undecided without foreign markers)."""
    return analyse(state)["is_english"]


def evidence(state: Any) -> dict:
    """Opt-in detail behind a verdict (ours, not the published `diagnostic`): words, scores and thresholds."""
    text = state_text(state)
    words, rate = _words_and_rate(text)
    counts = Counter(words)
    scores = {lang: _score(counts, lang) for lang in ("en",) + LANGUAGE_ORDER}
    evidenced = [lang for lang in LANGUAGE_ORDER if STOP_WORDS[lang].intersection(counts) - SHARED_WORDS]
    letters = _script_counts(text)
    return {"scanned_chars": len(text), "letters": sum(letters.values()), "words": len(words),
            "scores": {lang: n for lang, n in scores.items() if n}, "evidenced": evidenced,
            "diacritic_rate": rate, "shouted": _is_shouted(text), "non_latin_word": _has_non_latin_word(text, letters),
            "caps_runs": [text[a:b] for a, b in _caps_runs(text)],
            "thresholds": {"non_en_diacritic_rate": NON_EN_DIACRITIC_RATE,
                           "english_rescue_diacritic_rate": ENGLISH_RESCUE_DIACRITIC_RATE,
                           "non_latin_fraction": NON_LATIN_FRACTION, "non_latin_min_fraction": NON_LATIN_MIN_FRACTION,
                           "non_latin_min_letters": NON_LATIN_MIN_LETTERS}}
