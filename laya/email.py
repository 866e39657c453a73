"""Email helpers (torch-free): clean a plain-text email body and build the state `email_questions` reads.

    from laya import email_questions, email_state
    agent.predict(email_state("Invoice", raw_text, sender="a@b.com"), email_questions())

`clean_email_body` keeps the writer's new message: it cuts the quoted thread, the signature, mobile
footers and confidentiality disclaimers with fixed line rules (listed on the function) and tidies
whitespace. No language model, no HTML parsing: pass plain text.
"""

from __future__ import annotations

import operator
import re
import unicodedata
from typing import Any

from .numeric import nesting_guard, shown
from .presets import email_questions

__all__ = ["clean_email_body", "email_questions", "email_state"]

_I = re.IGNORECASE

# ---- step 3: quote headers (the start of the earlier thread) ----------------------------------------
_ATTRIBUTION = re.compile(r"^\s*on\s.*\bwrote\s*:\s*$", _I)
_ATTRIBUTION_WITH_DATE = re.compile(  # these three count only on a line with a digit (a date)
    r"^\s*(em\s.*\bescreveu|el\s.*\bescribi[óo]|le\s.*\ba [ée]crit\s?)\s*:\s*$", _I)
_SEPARATOR = re.compile(
    r"^\s*(-{2,}\s*(original|forwarded) message\s*-{2,}|"
    r"-{2,}\s*(mensagem original|mensagem encaminhada|mensaje original|mensaje reenviado|message d['’]origine)"
    r"\s*-{2,}|_{8,})\s*$", _I)
_FROM = re.compile(r"^\s*(from|de)\s?:", _I)
_SENT_NEXT = re.compile(r"^\s*(sent|enviad[oa](\s+(em|el))?|envoy[ée](\s+le)?)\s*:", _I)
_DATE_NEXT = re.compile(r"^\s*(data|fecha|date)\s*:.*(?<!\d)\d{4}(?!\d)", _I)
_WRAPPED_TAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)*[>\])\"']*\s*(wrote|escreveu|escribi[óo]|a [ée]crit\s?)\s*:\s*$", _I)
_ATTRIBUTION_HEAD = re.compile(r"^\s*(on|em|el|le)\s", _I)

# ---- step 4: signatures and device footers ---------------------------------------------------------
_CLOSING_EN = re.compile(
    r"^(best|kind|warmest|warm|many thanks|thanks|thank you|regards|cheers|sincerely)"
    r"(\s+(and regards|& regards|regards|wishes|again|in advance|a lot|so much|very much))?(?![\w])", _I)
_CLOSING_ROMANCE = re.compile(
    r"^(atenciosamente|att|abraços?|abs|um abraço|cordialmente|grat[oa]|"
    r"(muito\s+)?obrigad[oa]s?(\s+(desde já|pela atenção))?|(com os melhores\s+)?cumprimentos|saudações|"
    r"(un\s+)?saludos?(\s+cordiales)?|atentamente|(muchas\s+)?gracias(\s+de antemano)?|(bien\s+)?cordialement|"
    r"salutations(\s+distinguées)?|bien à vous|merci(\s+d['’]avance)?|bonne journée)[,!.]*$", _I)
_NAME_TOKEN_START = ("Lu", "Lt", "Lo")
_FOOTER_HEAD = re.compile(
    r"^(sent from(\s+my)?|enviado\s+(do|pelo|pela|via|desde|a partir do)(\s+(meu|minha|mi))?|"
    r"envoy[ée]\s+(depuis|de)(\s+(mon|ma|mes))?)\s+(?P<rest>.+?)[.!]*$", _I)
_DEVICE_WORDS = frozenset("iphone ipad android ios mobile celular telemóvel móvil galaxy smartphone samsung tablet "
                          "outlook yahoo mail e-mail email gmail windows".split())
_FOOTER_FILLERS = frozenset("para for no na phone device pro max mini plus".split())
_GET_OUTLOOK = re.compile(r"^(get outlook for (ios|android)|obter o outlook para \S+)[.!]*$", _I)

# ---- step 5: disclaimer phrases ("..." = a short run without a period) ----------------------------
_DISCLAIMER = re.compile("|".join((
    r"\b(e-?mail|message|information|communication|transmission|content)s?\b[^.]{0,80}\bconfidential\b[^.]{0,80}"
    r"\b(intended|solely|addressee|recipient|privileged|disclos|unauthori[sz]ed)",
    r"\bconfidential\b[^.]{0,60}\band\s+(may|is)\s+(also\s+)?(be\s+)?privileged",
    r"\bif you (have\s+)?received this (e-?mail|message) in error",
    r"\b(esta|este)\s+(mensagem|e-?mail|mensaje|correo)\b[^.]{0,80}(confidencia|sigilos|privilegiad)",
    r"\buso\s+(exclusivo|exclusivamente|únicamente)\b[^.]{0,60}(destinatári|destinatario|pessoa|persona|entidad)",
    r"\b(recebeu|recebido|receber)\s+(esta|este)\s+(mensagem|e-?mail)\b[^.]{0,30}por\s+(engano|erro)",
    r"\b(ha recibido|recibió|recibe)\s+(este|esta)\s+(mensaje|correo)\b[^.]{0,30}por\s+error",
    r"\bantes de imprimir\b[^.]{0,80}(meio ambiente|medio ambiente|natureza|planeta|realmente necess)",
    r"\b(meio|medio) ambiente\b[^.]{0,80}antes de imprimir",
    r"\b(ce|cet|cette)\s+(message|e-?mail|mail|courriel)\b[^.]{0,80}(confidentiel|privilégi)",
    r"\bavez reçu\s+(ce|cet|cette)\s+(message|e-?mail|mail)\b[^.]{0,30}par erreur",
    r"\busage\s+(exclusif|exclusivement|uniquement)\b[^.]{0,60}destinataire",
)), _I)


def _is_quote_header(lines: list[str], i: int) -> bool:
    """Whether line i starts the quoted thread (the caller asks only once a line has been kept)."""
    line = lines[i]
    if _ATTRIBUTION.match(line) or _SEPARATOR.match(line):
        return True
    if _ATTRIBUTION_WITH_DATE.match(line) and any(c.isdigit() for c in line):
        return True
    if _FROM.match(line):
        if "@" in line or "<" in line:
            return True
        following = lines[i + 1] if i + 1 < len(lines) else ""
        return bool(_SENT_NEXT.match(following) or _DATE_NEXT.match(following))
    return False


def _wrapped_tail(line: str) -> bool:
    """The second half of an attribution a client wrapped: `... ann@example.com> wrote:`."""
    return len(line) <= 120 and bool(_WRAPPED_TAIL.search(line))


def _scan_lines(text: str) -> list[str]:
    """Step 3: lines up to the quoted thread, `>` lines skipped."""
    lines = [line.rstrip() for line in text.split("\n")]
    kept: list[str] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith(">"):
            continue
        if kept and _is_quote_header(lines, i):
            break
        if kept and _wrapped_tail(line):
            head = kept[-1]
            if _ATTRIBUTION_HEAD.match(head) and any(c.isdigit() for c in head):
                kept.pop()
            break
        kept.append(line)
    return kept


def _is_name_token(token: str) -> bool:
    """A name after a closing: starts with an uppercase, titlecase or caseless letter."""
    for j, ch in enumerate(token):
        category = unicodedata.category(ch)
        if category.startswith("M") and j > 0:
            continue  # a combining mark is judged by the letter it rides on (already seen)
        return category in _NAME_TOKEN_START
    return False


def _is_sign_off(line: str) -> bool:
    if line == "--" or _CLOSING_ROMANCE.match(line):
        return True
    m = _CLOSING_EN.match(line)
    if not m:
        return False
    names = [core for core in (_strip_punctuation(t) for t in line[m.end():].split()) if core]
    return len(names) <= 3 and all(_is_name_token(t) for t in names)


def _strip_punctuation(token: str) -> str:
    """The token without leading/trailing punctuation ("Ann," -> "Ann", "-" -> "")."""
    start, end = 0, len(token)
    while start < end and unicodedata.category(token[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(token[end - 1]).startswith("P"):
        end -= 1
    return token[start:end]


def _is_device_footer(line: str) -> bool:
    if _GET_OUTLOOK.match(line):
        return True
    m = _FOOTER_HEAD.match(line)
    if not m:
        return False
    words = m.group("rest").lower().split()
    if not words or words[0] not in _DEVICE_WORDS:
        return False
    i = 1
    while i < len(words):
        word = words[i]
        if word == "using" and i + 1 < len(words):
            i += 2  # "using <app>"
            continue
        if word not in _DEVICE_WORDS and word not in _FOOTER_FILLERS and not word.isdigit():
            return False
        i += 1
    return True


def _cut_signature(kept: list[str]) -> list[str]:
    """Step 4: from the first sign-off or device footer in the lower part of the message, drop the rest."""
    n = len(kept)
    for i in range(max(1, min(int(0.6 * n), n - 8)), n):
        line = kept[i].strip()
        if (len(line) <= 40 and _is_sign_off(line)) or (len(line) <= 60 and _is_device_footer(line)):
            return kept[:i]
    return kept


def _pieces(sentence: str) -> list[str]:
    """A disclaimer sentence split where a new line starts with an uppercase letter."""
    pieces: list[str] = []
    for line in sentence.split("\n"):
        if pieces and not line.lstrip()[:1].isupper():
            pieces[-1] += "\n" + line
        else:
            pieces.append(line)
    return pieces


def _drop_disclaimers(paragraph: str) -> str:
    """Step 5: sentences (or lines of a sentence) with a disclaimer phrase go; the rest joined by spaces."""
    if not _DISCLAIMER.search(paragraph):
        return paragraph
    kept: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
        if not _DISCLAIMER.search(sentence):
            kept.append(sentence)
            continue
        kept.extend(piece for piece in _pieces(sentence) if not _DISCLAIMER.search(piece))
    return " ".join(piece.strip() for piece in kept if piece.strip())


def _budget(max_chars: Any) -> int:
    """`max_chars` as a slice index: what `text[:max_chars]` takes (ints, bools, numpy ints), else a TypeError."""
    try:
        return operator.index(max_chars)
    except TypeError:
        with nesting_guard("max_chars", "pass an int such as 3000", TypeError):
            raise TypeError("max_chars must be an integer (a slice budget: text[:max_chars]), "
                            f"got {shown(max_chars)} ({type(max_chars).__name__}); pass an int such as 3000") from None


def clean_email_body(body: Any, max_chars: int = 3000) -> str:
    """The writer's own message from a plain-text email body, at most `max_chars` characters.

    `max_chars` is a slice budget (`text[:max_chars]`), never refused: 0 gives "", a negative value trims
    characters off the end. Steps, in order:
      1. None -> ""; CRLF, CR and the two characters backslash-n become line breaks.
      2. A text longer than 4 * max_chars is cut to that length first.
      3. Lines are kept until, after at least one kept line, a quote header starts the earlier thread
         ("On ... wrote:", its Portuguese/Spanish/French forms, "--Original Message--" and friends, a rule
         of 8+ underscores, a "From:"/"De:" header, a wrapped "... <address> wrote:" tail); lines whose
         first non-space character is ">" are skipped.
      4. In the lower part of the message, the first sign-off ("Thanks,", "Regards, Łukasz", "--",
         "Atenciosamente", "Cordialement", ...) or device footer ("Sent from my iPhone", "Enviado do meu
         iPhone", "Get Outlook for iOS") is cut with everything after it.
      5. Confidentiality disclaimers are removed sentence by sentence, per paragraph.
      6. Paragraphs are stripped and joined by one blank line, runs of spaces/tabs become one space, and
         the result is cut to max_chars.
    """
    if body is None:  # R-EM-1 step 1 comes before any use of the budget (never refused)
        return ""
    budget = _budget(max_chars)
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not isinstance(body, str):
        raise TypeError(f"body must be a str or None, got {type(body).__name__}")
    text = body.replace("\r\n", "\n").replace("\r", "\n").replace("\\n", "\n")
    if len(text) > 4 * budget:
        text = text[:4 * budget]
    kept = _cut_signature(_scan_lines(text))
    paragraphs = re.split(r"\n(?:[ \t]*\n)+", "\n".join(kept))
    cleaned = (_drop_disclaimers(p).strip() for p in paragraphs)
    out = "\n\n".join(p for p in cleaned if p)
    return re.sub(r"[ \t]+", " ", out)[:budget]


def email_state(subject: Any, body: Any, sender: Any = None, clean: bool = True, max_chars: int = 3000,
                **extra: Any) -> dict:
    """The state `email_questions()` reads: {"subject", "body"}, then "from" when `sender` is given, then
    every extra keyword (`to=`, `ticket=`, ...) whose value is not None, in call order. `body` goes
    through `clean_email_body(body, max_chars)` unless `clean=False`."""
    for value, name in ((subject, "subject"), (body, "body"), (sender, "sender")):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")
    state: dict = {"subject": (subject or "").strip(),
                   "body": clean_email_body(body, max_chars) if clean else (body or "")}
    if sender:
        state["from"] = sender
    state.update((key, value) for key, value in extra.items() if value is not None)
    return state
