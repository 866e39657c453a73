"""Script and language evidence for routing a state to the English or the multilingual checkpoint.

Torch-free and cheap: the Router calls `analyse` before any forward pass. The question it answers is
narrow -- "is this English, clearly something else, or undecided?" -- because the English checkpoint
collapses on other languages while staying confident, and undecided text goes to the router's default.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

SCAN_CHARS = 4000  # only the start of the flattened state is scanned (and of each leaf)
DIACRITIC_NON_ENGLISH = 0.02  # this share of accented Latin letters says "not English" ...
DIACRITIC_ENGLISH_RESCUE = 0.06  # ... unless English stop words win and the share stays below this
NON_LATIN_FRACTION = 0.2
NON_LATIN_FRACTION_MANY = 0.1  # with at least NON_LATIN_MANY_LETTERS non-Latin letters
NON_LATIN_MANY_LETTERS = 10
SEGMENT_MIN_EVIDENCE = 2  # a single line/leaf needs two non-Latin letters or two foreign stop words

# (first, last, script) code point ranges; Latin is handled separately.
_SCRIPT_RANGES = (
    (0x0370, 0x03FF, "greek"), (0x1F00, 0x1FFF, "greek"),
    (0x0400, 0x052F, "cyrillic"), (0x1C80, 0x1C8F, "cyrillic"), (0x2DE0, 0x2DFF, "cyrillic"),
    (0xA640, 0xA69F, "cyrillic"),
    (0x0530, 0x058F, "armenian"), (0x0590, 0x05FF, "hebrew"), (0xFB1D, 0xFB4F, "hebrew"),
    (0x0600, 0x06FF, "arabic"), (0x0750, 0x077F, "arabic"), (0x08A0, 0x08FF, "arabic"),
    (0xFB50, 0xFDFF, "arabic"), (0xFE70, 0xFEFF, "arabic"),
    (0x0900, 0x097F, "devanagari"), (0xA8E0, 0xA8FF, "devanagari"), (0x0980, 0x09FF, "bengali"),
    (0x0A00, 0x0A7F, "gurmukhi"), (0x0A80, 0x0AFF, "gujarati"), (0x0B00, 0x0B7F, "oriya"),
    (0x0B80, 0x0BFF, "tamil"), (0x0C00, 0x0C7F, "telugu"), (0x0C80, 0x0CFF, "kannada"),
    (0x0D00, 0x0D7F, "malayalam"), (0x0D80, 0x0DFF, "sinhala"), (0x0E00, 0x0E7F, "thai"),
    (0x0E80, 0x0EFF, "lao"), (0x0F00, 0x0FFF, "tibetan"), (0x1000, 0x109F, "myanmar"),
    (0x10A0, 0x10FF, "georgian"), (0x2D00, 0x2D2F, "georgian"), (0x1200, 0x139F, "ethiopic"),
    (0x2D80, 0x2DDF, "ethiopic"), (0x1780, 0x17FF, "khmer"), (0x19E0, 0x19FF, "khmer"),
    (0x1100, 0x11FF, "hangul"), (0x3130, 0x318F, "hangul"), (0xA960, 0xA97F, "hangul"),
    (0xAC00, 0xD7AF, "hangul"), (0xD7B0, 0xD7FF, "hangul"), (0xFFA0, 0xFFDC, "hangul"),
    (0x3040, 0x30FF, "kana"), (0x31F0, 0x31FF, "kana"), (0xFF66, 0xFF9F, "kana"), (0x1B000, 0x1B16F, "kana"),
    (0x2E80, 0x2FDF, "han"), (0x3005, 0x3007, "han"), (0x3400, 0x4DBF, "han"), (0x4E00, 0x9FFF, "han"),
    (0xF900, 0xFAFF, "han"), (0x20000, 0x3134F, "han"),
)
SCRIPTS = tuple(dict.fromkeys(s for _, _, s in _SCRIPT_RANGES))

# Best-effort language of a non-Latin script (Bengali also has a stop-word table below).
SCRIPT_LANGUAGE = {
    "greek": "el", "cyrillic": "ru", "armenian": "hy", "hebrew": "he", "arabic": "ar", "devanagari": "hi",
    "bengali": "bn", "gurmukhi": "pa", "gujarati": "gu", "oriya": "or", "tamil": "ta", "telugu": "te",
    "kannada": "kn", "malayalam": "ml", "sinhala": "si", "thai": "th", "lao": "lo", "tibetan": "bo",
    "myanmar": "my", "georgian": "ka", "ethiopic": "am", "khmer": "km", "hangul": "ko", "kana": "ja",
    "han": "zh",
}

# Frequent function words. Words shared between tables count for each, so they cancel out.
STOP_WORDS = {
    "en": "the and is are was were be been you your with this that these those have has had for not of to "
          "it its in on at by from what how why when which who will would can could should please my we "
          "our they their there i me an or if do does did don't i'm it's about just",
    "fr": "le la les des du un une et est sont avec pour dans sur pas je vous nous ils elle il que qui "
          "mais ou au aux ce cette mon ma mes votre vos leur être avoir c'est j'ai",
    "de": "der die das den dem des und ist sind mit für nicht ich sie wir ein eine einen auf von zu "
          "dass aber oder wie was wenn mein meine ihr ihre haben habe bitte auch noch bei",
    "es": "el la los las de del y es son con para por que no un una en mi mis tu su sus pero como está "
          "estoy muy al lo le se hola gracias necesito ayuda",
    "pt": "o a os as de do da dos das e é são com para por que não um uma em no na meu minha você "
          "mas como está estou muito ao se obrigado preciso",
    "it": "il lo la gli le di del della e è sono con per che non un una in mi mio mia ma come sto molto "
          "al nel questo questa grazie ho",
    "nl": "de het een en is zijn met voor niet ik jij je wij we van op te dat die maar of hoe wat mijn "
          "uw hebben heb ook nog bij",
    "sv": "och är att det som en ett med för inte jag du vi på av till den har hur vad min mitt men "
          "eller också",
    "ro": "și este sunt cu pentru nu eu tu noi un o în pe la de că care dar sau cum ce meu mea am "
          "vă mulțumesc",
    "bn": "এবং এই একটি আমি আমার আপনি আপনার না কি করে করা হয় ছিল থেকে জন্য সঙ্গে যে তা তিনি",
    "az": "və bu bir mən sən biz onlar üçün ilə deyil da də nə necə mənim sizin var yox edir çox",
}
_STOP_SETS = {lang: frozenset(words.split()) for lang, words in STOP_WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")


def letter_script(ch: str) -> str | None:
    """'latin', one of SCRIPTS, 'other' for letters of unlisted scripts, None for non-letters."""
    if not ch.isalpha():
        return None
    cp = ord(ch)
    if cp < 0x0250 or 0x1E00 <= cp <= 0x1EFF or 0x2C60 <= cp <= 0x2C7F or 0xA720 <= cp <= 0xA7FF \
            or 0xFF21 <= cp <= 0xFF5A:
        return "latin"
    for first, last, script in _SCRIPT_RANGES:
        if first <= cp <= last:
            return script
    return "other"


def string_leaves(state: Any) -> list[str]:
    """The string values of a dict/list state, depth first (keys are field names, not language evidence)."""
    out: list[str] = []
    stack = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(list(item)))
    return out


def _flatten(state: Any) -> tuple[str, list[str]]:
    """(scanned text, segments checked one by one): lines of a string, string leaves of a dict/list."""
    if state is None:
        raise TypeError("state must be a str, dict or list, got None")
    # NFC first, so a decomposed "e" + combining accent counts as one accented letter.
    if isinstance(state, str):
        text = unicodedata.normalize("NFC", state[:SCAN_CHARS])
        return text, text.splitlines()
    if isinstance(state, (dict, list, tuple)):
        leaves = [unicodedata.normalize("NFC", leaf[:SCAN_CHARS]) for leaf in string_leaves(state)]
        return "\n".join(leaves)[:SCAN_CHARS], leaves
    text = unicodedata.normalize("NFC", str(state)[:SCAN_CHARS])
    return text, [text]


def _evidence(text: str) -> dict:
    """Letter counts by script, accented-Latin share and stop-word hits of one piece of text."""
    counts: dict[str, int] = {}
    accented = 0
    for ch in text:
        script = letter_script(ch)
        if script is None:
            continue
        counts[script] = counts.get(script, 0) + 1
        if script == "latin" and not ("a" <= ch.lower() <= "z"):
            accented += 1
    letters = sum(counts.values())
    latin = counts.get("latin", 0)
    words = [w.replace("’", "'") for w in _WORD.findall(text.lower())]
    hits = {lang: sum(w in stops for w in words) for lang, stops in _STOP_SETS.items()}
    return {"counts": counts, "letters": letters, "latin": latin, "non_latin": letters - latin,
            "diacritic_rate": accented / latin if latin else 0.0, "hits": hits, "words": len(words)}


def _non_latin_decides(ev: dict) -> bool:
    if not ev["letters"] or not ev["non_latin"]:
        return False
    fraction = ev["non_latin"] / ev["letters"]
    threshold = NON_LATIN_FRACTION_MANY if ev["non_latin"] >= NON_LATIN_MANY_LETTERS else NON_LATIN_FRACTION
    return fraction >= threshold


def _best_foreign(hits: dict) -> tuple[str | None, int]:
    lang, n = max(((k, v) for k, v in hits.items() if k != "en"), key=lambda kv: kv[1], default=(None, 0))
    return (lang, n) if n else (None, 0)


def _dominant_script(counts: dict) -> str:
    non_latin = {k: v for k, v in counts.items() if k != "latin"}
    script = max(non_latin, key=non_latin.get) if non_latin else "unknown"
    if script == "other":  # letters of a script outside the list
        return "unknown"
    # Japanese mixes kana into mostly-Han text: any real kana share makes it Japanese, not Chinese.
    if script == "han" and counts.get("kana", 0) >= max(2, 0.1 * counts["han"]):
        script = "kana"
    return script


def _decide_latin(ev: dict) -> tuple[str, str | None, str]:
    """('english' | 'other' | 'undecided', language, rule) for Latin text."""
    en = ev["hits"]["en"]
    foreign, n_foreign = _best_foreign(ev["hits"])
    rate = ev["diacritic_rate"]
    if n_foreign > en:
        return "other", foreign, f"{foreign} stop words ({n_foreign}) outnumber English ones ({en})"
    if rate >= DIACRITIC_NON_ENGLISH:
        if en and en > n_foreign and rate < DIACRITIC_ENGLISH_RESCUE:
            return "english", "en", (f"accented letters {rate:.3f} >= {DIACRITIC_NON_ENGLISH} but English stop "
                                     f"words win and the rate stays below {DIACRITIC_ENGLISH_RESCUE}")
        # Foreign stop words name the language only when they at least match the English ones.
        language = foreign if n_foreign and n_foreign >= en else None
        return "other", language, f"accented Latin letters {rate:.3f} >= {DIACRITIC_NON_ENGLISH}"
    if en and en >= n_foreign:
        return "english", "en", f"English stop words ({en}), no foreign evidence"
    return "undecided", None, "Latin letters without stop-word or accent evidence"


def _segment_language(segment: str) -> tuple[str | None, str] | None:
    """(language, script) when one line/leaf is clearly not English; None otherwise.

    Accents alone never flag a segment: a name such as "José" in an English ticket is not Spanish.
    """
    ev = _evidence(segment)
    if ev["non_latin"] >= SEGMENT_MIN_EVIDENCE and _non_latin_decides(ev):
        script = _dominant_script(ev["counts"])
        return SCRIPT_LANGUAGE.get(script), script
    foreign, n = _best_foreign(ev["hits"])
    if n >= SEGMENT_MIN_EVIDENCE and n > ev["hits"]["en"]:
        return foreign, "latin"
    return None


def analyse(state: Any, *, explain: bool = False) -> dict:
    """Script profile and language evidence of a state (str, dict or list).

    Keys: script, script_profile, language, is_english, language_undecided, diacritic_rate,
    non_latin_fraction, mixed_segment (+ diagnostic with explain=True).
    """
    text, segments = _flatten(state)
    ev = _evidence(text)
    letters = ev["letters"]
    profile = {k: round(v / letters, 4) for k, v in sorted(ev["counts"].items(), key=lambda kv: -kv[1])} \
        if letters else {}
    non_latin_fraction = ev["non_latin"] / letters if letters else 0.0
    mixed = None
    checked = 0
    if not letters:
        script, language, verdict, rule = "unknown", None, "undecided", "no letters"
    elif _non_latin_decides(ev):
        script = _dominant_script(ev["counts"])
        language = SCRIPT_LANGUAGE.get(script)
        verdict, rule = "other", f"non-Latin letters {non_latin_fraction:.3f} of {letters} (script {script})"
    else:
        script = "latin"
        verdict, language, rule = _decide_latin(ev)
        if verdict != "other":
            for index, segment in enumerate(segments):
                checked += 1
                found = _segment_language(segment)
                if found is not None:
                    mixed = {"index": index, "language": found[0], "script": found[1], "text": segment[:80]}
                    verdict, rule = "other", f"segment {index} reads as {found[0] or found[1]}"
                    language = language if language not in (None, "en") else found[0]
                    break
    result = {
        "script": script,
        "script_profile": profile,
        "language": language,
        "is_english": verdict == "english",
        "language_undecided": verdict == "undecided",
        "diacritic_rate": round(ev["diacritic_rate"], 4),
        "non_latin_fraction": round(non_latin_fraction, 4),
        "mixed_segment": mixed,
    }
    if explain:
        result["diagnostic"] = {
            "rule": rule, "letters": letters, "latin_letters": ev["latin"], "words": ev["words"],
            "stop_word_hits": {k: v for k, v in ev["hits"].items() if v},
            "segments_checked": checked,
            "scanned_chars": len(text),
            "thresholds": {"diacritic_non_english": DIACRITIC_NON_ENGLISH,
                           "diacritic_english_rescue": DIACRITIC_ENGLISH_RESCUE,
                           "non_latin_fraction": NON_LATIN_FRACTION,
                           "non_latin_fraction_many": NON_LATIN_FRACTION_MANY,
                           "non_latin_many_letters": NON_LATIN_MANY_LETTERS},
        }
    return result


detect_language = analyse


def detect_script(state: Any) -> str:
    """'latin', 'unknown' (no letters) or the dominant non-Latin script."""
    return analyse(state)["script"]


def is_english(state: Any) -> bool:
    """True only when the evidence says English (undecided text is not English)."""
    return analyse(state)["is_english"]

