"""Email helpers (torch-free): clean a plain-text email body and build the state `email_questions` reads.

    from laya import email_questions, email_state
    agent.predict(email_state(subject="Invoice", body=raw_text, sender="a@b.com"), email_questions())

`clean_email_body` removes what is not the writer's new message - quoted replies, attribution lines,
forwarding headers, signatures, mobile footers - and tidies whitespace. It is a fixed set of line rules
(listed on the function), deterministic, with no language model and no HTML parsing: pass plain text.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["clean_email_body", "email_state"]

# a header line of a forwarded / quoted message ("From: Ann <a@b.com>", "Sent: Monday ...")
_HEADER = re.compile(r"^\s*(from|sent|date|to|cc|bcc|subject|reply-to)\s*:", re.IGNORECASE)
# forwarding markers: Gmail / Thunderbird "---------- Forwarded message ---------", Apple Mail
# "Begin forwarded message:" (Outlook's "____" rule before a header block is handled as a reply: _ORIGINAL)
_FORWARD = re.compile(r"^\s*(-{2,}\s*(original\s+)?forwarded message\s*-*|begin forwarded message\s*:?|"
                      r"-{2,}\s*weitergeleitete nachricht\s*-*|-{2,}\s*message transf[ée]r[ée]\s*-*)\s*$",
                      re.IGNORECASE)
# Outlook's reply separator; everything after it is the earlier thread
_ORIGINAL = re.compile(r"^\s*(-{2,}\s*original message\s*-{2,}|-{2,}\s*urspr[üu]ngliche nachricht\s*-{2,}|"
                       r"_{20,})\s*$", re.IGNORECASE)
# reply attribution: "On Mon, 3 Jun 2024 at 10:00, Ann <a@b.com> wrote:" and a few translations
_WROTE_END = re.compile(r"(wrote|schrieb|a [ée]crit|escribi[óo]|schreef|ha scritto|skrev)\s*:\s*$", re.IGNORECASE)
_WROTE_START = re.compile(r"^\s*(on|am|le|el|op|il|den|w dniu)\s", re.IGNORECASE)
# the signature delimiter of RFC 3676 ("-- "), also without its trailing space as many clients send it
_SIG_DELIM = re.compile(r"^-- ?$")
# a closing line on its own: the signature block starts here
_SIGN_OFF = re.compile(
    r"^\s*(best|best regards|best wishes|kind regards|warm regards|warmest regards|regards|many thanks|"
    r"thanks|thanks again|thanks so much|thanks in advance|thank you|thank you so much|cheers|sincerely|"
    r"sincerely yours|yours sincerely|yours truly|yours|all the best|with thanks|take care|"
    r"mit freundlichen gr[üu](ß|ss)en|(viele |beste |liebe )?gr[üu](ß|ss)e|"
    r"cordialement|bien cordialement|bien [àa] vous|saludos|un saludo|atentamente|cordiali saluti|"
    r"met vriendelijke groet|groeten)\s*[,.!]*\s*$", re.IGNORECASE)
SIGNATURE_MAX_LINES = 6  # a sign-off counts only when at most this many non-empty lines follow it
# client footers, removed wherever they stand
_FOOTER = re.compile(r"^\s*(sent from my \w[\w -]*|sent from (outlook|mail) for \w+|get outlook for \w+|"
                     r"sent from yahoo mail.*|von meinem \w+ gesendet|envoy[ée] de mon \w+)\s*\.?\s*$",
                     re.IGNORECASE)
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"), None)


def _header_block_end(lines: list[str], start: int) -> int:
    """Index after the header lines starting at `start` (blank lines before them skipped)."""
    i = start
    while i < len(lines) and not lines[i].strip():
        i += 1
    j = i
    while j < len(lines) and _HEADER.match(lines[j]):
        j += 1
    return j if j > i else start


def _is_reply_header(lines: list[str], i: int) -> bool:
    """An Outlook-style quoted header: "From:" followed within 4 lines by "Sent:"/"Date:" and "To:"/"Subject:"."""
    if not re.match(r"^\s*from\s*:", lines[i], re.IGNORECASE):
        return False
    names = {m.group(1).lower() for line in lines[i + 1:i + 5] if (m := _HEADER.match(line))}
    return bool(names & {"sent", "date"}) and bool(names & {"to", "subject"})


def _attribution(lines: list[str], i: int) -> int:
    """How many lines (0, 1 or 2) an "On ... wrote:" attribution starting at line i takes."""
    line = lines[i]
    if not _WROTE_START.match(line):
        return 0
    if _WROTE_END.search(line):
        return 1
    if i + 1 < len(lines) and _WROTE_END.search(lines[i + 1]) and len(line) + len(lines[i + 1]) < 300:
        return 2  # clients wrap a long attribution ("... Ann Lee <\nann@example.com> wrote:")
    return 0


def _clean_segment(lines: list[str]) -> list[str]:
    """Quotes, attributions, footers and the signature out of one message (a forward is its own)."""
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">"):  # quoted text of an earlier message
            i += 1
            continue
        n = _attribution(lines, i)
        if n:
            i += n
            continue
        if _FOOTER.match(line):
            i += 1
            continue
        kept.append(line)
        i += 1
    for j, line in enumerate(kept):  # "-- " delimiter: the rest is the signature
        if _SIG_DELIM.match(line):
            kept = kept[:j]
            break
    # A closing line ("Best," "Thanks!") with something written above it and only signature-like lines
    # below: the LAST such line, so an early "Thanks!" before the actual request never cuts the request.
    for j in range(len(kept) - 1, -1, -1):
        if _SIGN_OFF.match(kept[j]) and any(x.strip() for x in kept[:j]):
            below = [x for x in kept[j + 1:] if x.strip()]
            if len(below) <= SIGNATURE_MAX_LINES and not any(_is_sentence(x) for x in below):
                kept = kept[:j]
            break
    return kept


def _is_sentence(line: str) -> bool:
    """Prose rather than a signature line (name, title, company, phone): many words, or a few words
    ending like a sentence."""
    words = line.split()
    return len(words) >= 7 or (len(words) >= 4 and line.rstrip()[-1:] in ".?!")


def _tidy(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        line = re.sub(r"[ \t\f\v]+", " ", line).strip()
        if line or (out and out[-1]):  # at most one blank line in a row
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def clean_email_body(text: str) -> str:
    """The writer's own message from a plain-text email body.

    Rules, applied in this order (same input, same output):
      1. Line breaks become "\\n"; non-breaking spaces become spaces; zero-width characters go.
      2. Outlook's earlier thread: from a "-----Original Message-----" line (or the rule of 20+
         underscores Outlook draws), or from a quoted header block ("From:" with "Sent:"/"Date:" and
         "To:"/"Subject:" in the next 4 lines) that has text above it, everything to the end is removed.
      3. Forwards: a forwarding marker ("---------- Forwarded message ---------", "Begin forwarded
         message:") and the header lines after it (From/Sent/Date/To/Cc/Bcc/Subject/Reply-To) are
         removed; the forwarded text is kept, as its own message for rules 4-7. A header block at the very
         start of the body (a pasted message) is removed the same way
         (when it has at least 2 header lines: one "To: ..." line opening a message is text).
      4. Quoted lines - first non-blank character ">" - are removed.
      5. Attribution lines ("On <date>, <name> wrote:", also wrapped over two lines, and the German,
         French, Spanish, Dutch, Italian and Scandinavian forms) are removed.
      6. Client footers ("Sent from my iPhone", "Get Outlook for iOS", ...) are removed.
      7. Signatures: from a "-- " (or "--") line to the end of that message; else from a closing line on
         its own ("Best regards,", "Thanks!", "Cheers", "Mit freundlichen Grüßen", ...) that has text above
         it and at most `SIGNATURE_MAX_LINES` non-empty lines (name, title, phone) after it.
      8. Whitespace: runs of spaces/tabs become one space, lines are stripped, at most one blank line in
         a row, no blank lines at either end.
    Nothing inside a line is rewritten beyond whitespace. When the rules would leave nothing (a message
    that is all quote or all signature), the whitespace-tidied original is returned instead, so a state
    never loses all of its text.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ").translate(_INVISIBLE)
    lines = text.split("\n")
    # rule 2: cut the earlier thread
    for i, line in enumerate(lines):
        separator = bool(_ORIGINAL.match(line))
        if not separator and not _is_reply_header(lines, i):
            continue
        above = [x for x in lines[:i] if x.strip()]
        if not separator and above and _FORWARD.match(above[-1]):
            continue  # a forwarded message's own header block: rule 3 removes it
        if above:
            lines = lines[:i]
            break
        if separator:  # nothing above it: drop the separator, keep the message below
            lines = lines[i + 1:]
            break
    # rule 3: split into messages at forwarding markers, dropping the markers and their header lines
    segments: list[list[str]] = []
    current: list[str] = []
    i = _header_block_end(lines, 0)
    if i - sum(1 for x in lines[:i] if not x.strip()) < 2:
        i = 0  # one "To: ..." line opening a message is text, not a pasted header block
    while i < len(lines):
        if _FORWARD.match(lines[i]):
            segments.append(current)
            current = []
            i = _header_block_end(lines, i + 1)
            continue
        current.append(lines[i])
        i += 1
    segments.append(current)
    cleaned = [_tidy(_clean_segment(seg)) for seg in segments]
    body = "\n\n".join(s for s in cleaned if s)
    return body if body else _tidy(text.split("\n"))


def email_state(subject: str | None = None, body: str | None = None, sender: str | None = None, *,
                to: Any = None, clean: bool = True) -> dict:
    """The state `email_questions()` reads: a dict with `body` (always) and `subject`, `sender`, `to`
    only when given. Key order puts the short fields first (`sender`, `to`, `subject`, `body`), so a
    long body is what truncation cuts. `body` is passed through `clean_email_body` unless
    `clean=False`; `to` is a string or a list of addresses (joined with ", ")."""
    for value, name in ((subject, "subject"), (sender, "sender")):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if body is not None and not isinstance(body, str):
        raise TypeError(f"body must be a str or None, got {type(body).__name__}")
    if to is not None and not isinstance(to, str):
        if not isinstance(to, (list, tuple)) or not all(isinstance(x, str) for x in to):
            raise TypeError(f"to must be a str or a list of str, got {to!r}")
        to = ", ".join(to)
    state: dict = {}
    if sender is not None:
        state["sender"] = sender.strip()
    if to is not None:
        state["to"] = to.strip()
    if subject is not None:
        state["subject"] = " ".join(subject.split())
    text = body or ""
    state["body"] = clean_email_body(text) if clean else text
    return state
