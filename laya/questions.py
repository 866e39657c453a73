"""Question and state validation and normalisation (torch-free).

A caller's question dict becomes a list of `Question` records that the sequence builder and the
answer decoder share. Every error is a `ValueError` whose message starts `question '<id>': ` and
says what to change, so servers can hand it back verbatim (HTTP 422).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .numeric import nesting_guard

QTYPES = {"choice": 0, "score": 1, "noul": 2}
QTYPE_NAMES = {v: k for k, v in QTYPES.items()}

NOUL_DEFAULT_FALSE = "no, the statement does not hold"
NOUL_DEFAULT_TRUE = "yes, the statement holds"


@dataclass(frozen=True)
class Question:
    """One validated question, ready to be rendered into a token row."""

    qid: Any  # the caller's key, returned unchanged in the answers
    qtype: str
    instructions: str  # already JSON-encoded when the caller gave a non-string
    option_texts: tuple[str, ...]  # canonical order (caller's order; noul = [false, true])
    labels: tuple[Any, ...]  # choice: original label objects; score: "0".."k-1"; noul: ("false", "true")
    legend: tuple[str, ...] | None  # score only: rendered level texts
    option_order: tuple[int, ...] | None  # slot s shows option option_order[s]

    @property
    def k(self) -> int:
        return len(self.option_texts)

    @property
    def qtype_id(self) -> int:
        return QTYPES[self.qtype]

    def slot_texts(self) -> list[str]:
        """Option texts in the order they appear in the sequence."""
        if self.option_order is None:
            return list(self.option_texts)
        return [self.option_texts[i] for i in self.option_order]


_TOO_DEEP = "nests too deeply to render as JSON (past Python's recursion limit); flatten it or pass it as text"
_SURROGATE_FIX = ("text must be encodable as UTF-8: pair the surrogate with its other half or remove it (a "
                  "lone surrogate usually comes from a string cut in the middle of an emoji)")


def lone_surrogate(text: str) -> tuple[int, int] | None:
    """(position, code point) of the first unpaired UTF-16 surrogate in `text`, or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start, ord(text[e.start])
    return None


def check_text(what: str, text: str) -> str:
    """`text` unchanged, or a ValueError naming `what` when it cannot be tokenised (a lone surrogate)."""
    found = lone_surrogate(text)
    if found is not None:
        raise ValueError(f"{what} contains a lone surrogate U+{found[1]:04X} at position {found[0]}; {_SURROGATE_FIX}")
    return text


def _json_text(value: Any, what: str, **kwargs: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, **kwargs)
    except RecursionError:
        raise ValueError(f"{what} {_TOO_DEEP}") from None
    except (TypeError, ValueError) as e:  # a set, a tuple key, numpy scalars, a circular reference...
        raise type(e)(f"{what} is not JSON data ({e}); convert it to str keys and str, number, bool, None, list or "
                      "dict values first") from None


def render_criterion(value: Any) -> str:
    """Strings verbatim; anything else as one-line JSON (the published rendering)."""
    if isinstance(value, str):
        return value
    return _json_text(value, "criterion", separators=(", ", ": "), default=str)


def render_options(qtype: str, criteria: Any, labels: dict | None = None) -> list[str]:
    """Option texts of a question in canonical order (validated input expected)."""
    if qtype == "choice":
        return [str(label) if desc is None or desc == "" else f"{label}: {render_criterion(desc)}"
                for label, desc in criteria.items()]
    if qtype == "score":
        return [f"level {i}: {render_criterion(level)}" for i, level in enumerate(criteria)]
    criteria = criteria or {}
    names = labels or {"false": "false", "true": "true"}
    false_text = criteria.get("false") or NOUL_DEFAULT_FALSE
    true_text = criteria.get("true") or NOUL_DEFAULT_TRUE
    return [f"{names['false']}: {render_criterion(false_text)}",
            f"{names['true']}: {render_criterion(true_text)}"]


def render_state(state: Any) -> str:
    """The text a state contributes: strings verbatim, dicts and lists as JSON; a ValueError for a state that
    cannot be tokenised (a lone surrogate) or rendered (nested past the recursion limit)."""
    return check_text("state", state_text(state))


def state_text(state: Any) -> str:
    """`render_state` without the tokenisability check (the HTTP server answers surrogates with its own 400)."""
    if state is None:
        raise TypeError("state is None; pass a string, a JSON object (dict) or a list of turns")
    if isinstance(state, str):
        return state
    if isinstance(state, (dict, list)):
        return _json_text(state, "state")
    raise TypeError(
        f"state must be a str, dict or list, not {type(state).__name__}; "
        "convert it to text or JSON-compatible data first")


def located(error: Exception, where: str) -> Exception:
    """The same TypeError/ValueError with " (at <where>)" appended (which item of a batch failed); others as is."""
    if type(error) not in (TypeError, ValueError):
        return error
    return type(error)(f"{error} (at {where})")


def render_states(states: list) -> list[str]:
    """`render_state` of each state of a batch; with several states, an error names the bad one's index."""
    texts = []
    for i, state in enumerate(states):
        try:
            if state is None:
                raise TypeError("states must not contain None; pass a str, dict or list per state")
            texts.append(render_state(state))
        except (TypeError, ValueError) as e:
            if len(states) < 2:
                raise
            raise located(e, f"states[{i}]") from None
    return texts


def keeps_tail(state: Any) -> bool:
    """A list state is a conversation: truncation keeps its newest (last) tokens."""
    return isinstance(state, list)


def _fail(qid: Any, message: str) -> ValueError:
    return ValueError(f"question '{qid}': {message}")


def _check_qid(qid: Any) -> None:
    if qid is None:
        raise ValueError("question id must not be None")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or (isinstance(qid, str) and not qid.strip()):
        raise ValueError(f"question id must be a non-empty string, got {qid!r}")


_ANSWER_TEXT = "add the text the model should answer"


def _instructions_text(qid: Any, definition: dict) -> str:
    if "instructions" not in definition:
        raise _fail(qid, f"no 'instructions'; {_ANSWER_TEXT}")
    value = definition["instructions"]
    if value is None:
        raise _fail(qid, f"'instructions' must not be None; {_ANSWER_TEXT}")
    if isinstance(value, str):
        text = value
    elif isinstance(value, (dict, list)) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        try:
            text = _json_text(value, "'instructions'")
        except (TypeError, ValueError) as e:
            raise _fail(qid, str(e)) from None
    else:
        raise _fail(qid, f"'instructions' must be a string (or JSON data), not {type(value).__name__}")
    if not text.strip() or (isinstance(value, (dict, list)) and not value):  # "[]" / "{}" ask nothing either
        raise _fail(qid, f"'instructions' must not be empty; {_ANSWER_TEXT}")
    try:
        return check_text("'instructions'", text)
    except ValueError as e:
        raise _fail(qid, str(e)) from None


def _option_name(qtype: str, index: int, label: Any) -> str:
    if qtype == "choice":
        return f"option {label!r}"
    if qtype == "score":
        return f"score level {index}"
    return f"the {label!r} option"


def _score_legend(qid: Any, levels: list) -> tuple[str, ...]:
    legend = []
    for i, level in enumerate(levels):
        try:
            legend.append(render_criterion(level))
        except ValueError:
            raise _fail(qid, f"score level {i} {_TOO_DEEP}") from None
    return tuple(legend)


def _option_texts(qid: Any, qtype: str, criteria: Any, labels: dict | None, option_labels: tuple) -> tuple:
    """The rendered option texts, each one tokenisable; errors name the option."""
    try:
        texts = tuple(render_options(qtype, criteria, labels))
    except ValueError:
        raise _fail(qid, f"an option description {_TOO_DEEP}") from None
    for i, (text, label) in enumerate(zip(texts, option_labels)):
        if lone_surrogate(text) is not None:  # the message is built only for a bad option
            try:
                check_text(f"{_option_name(qtype, i, label)} text {text!r}", text)
            except ValueError as e:
                raise _fail(qid, str(e)) from None
    return texts


def _is_scalar_label(label: Any) -> bool:
    return isinstance(label, (str, int, float, bool))


def _choice_criteria(qid: Any, criteria: Any) -> dict:
    if criteria is None:
        raise _fail(qid, "a choice question needs 'criteria': a dict {label: description} or a list of labels")
    if isinstance(criteria, dict):
        items = list(criteria.items())
    elif isinstance(criteria, (list, tuple)):
        items = [(label, None) for label in criteria]
    else:
        raise _fail(qid, f"'criteria' must be a dict {{label: description}} or a list of labels, "
                         f"not {type(criteria).__name__}")
    if not items:
        raise _fail(qid, "'criteria' has no options; give at least one label")
    out: dict = {}
    for label, desc in items:
        if label is None:
            raise _fail(qid, "option label None is not allowed; use a string label")
        try:
            hash(label)
        except TypeError:
            raise _fail(qid, f"option label {label!r} is not hashable; use a string label") from None
        if not _is_scalar_label(label):
            raise _fail(qid, f"option label {label!r} must be a string, number or bool")
        if isinstance(label, float) and not math.isfinite(label):
            raise _fail(qid, f"option label {label!r} is not a finite number; use a string label")
        if label in out:
            raise _fail(qid, f"option label {label!r} appears more than once (1, 1.0 and True count as equal); "
                             "make the labels distinct")
        out[label] = desc
    return out


def _score_levels(qid: Any, criteria: Any) -> list:
    if not isinstance(criteria, (list, tuple)) or not criteria:
        raise _fail(qid, "a score question needs 'criteria': a non-empty list of level descriptions, level 0 first")
    for i, level in enumerate(criteria):
        if level is None:
            raise _fail(qid, f"score level {i} is None; describe every level")
    return list(criteria)


def _noul_criteria(qid: Any, criteria: Any) -> dict | None:
    if criteria is None:
        return None
    if not isinstance(criteria, dict):
        raise _fail(qid, f"noul 'criteria' must be a dict with keys 'true'/'false', not {type(criteria).__name__}")
    out = {}
    for key, value in criteria.items():
        name = str(key).lower() if isinstance(key, bool) else key
        if name not in ("true", "false"):
            raise _fail(qid, f"noul 'criteria' key {key!r} is not allowed; use only 'true' and 'false'")
        out[name] = value
    return out


def _noul_labels(qid: Any, qtype: str, labels: Any) -> dict | None:
    if labels is None:
        return None
    if qtype != "noul":
        raise _fail(qid, f"'labels' is only for noul questions, not {qtype}; remove it")
    if not isinstance(labels, dict) or set(labels) != {"false", "true"}:
        raise _fail(qid, "'labels' must be a dict with exactly the keys 'false' and 'true'")
    for key in ("false", "true"):
        if not isinstance(labels[key], str) or not labels[key].strip():
            raise _fail(qid, f"'labels'['{key}'] must be a non-empty string")
    if labels["false"].strip() == labels["true"].strip():
        raise _fail(qid, "'labels' for 'false' and 'true' must differ")
    return {"false": labels["false"], "true": labels["true"]}


def _option_order(qid: Any, order: Any, k: int) -> tuple[int, ...] | None:
    if order is None:
        return None
    if not isinstance(order, (list, tuple)) or any(isinstance(i, bool) or not isinstance(i, int) for i in order):
        raise _fail(qid, f"'option_order' must be a list of option indices, got {order!r}")
    if sorted(order) != list(range(k)):
        raise _fail(qid, f"'option_order' {list(order)!r} must be a permutation of 0..{k - 1}")
    return tuple(order)


def check_question(qid: Any, definition: Any) -> Question:
    """Validate one question definition and return its normalised record."""
    with nesting_guard("question id", "use a string"):
        _check_qid(qid)
    with nesting_guard("the definition", "flatten it", lambda text: _fail(qid, text)):
        return _checked_question(qid, definition)


def _checked_question(qid: Any, definition: Any) -> Question:
    if not isinstance(definition, dict):
        raise _fail(qid, f"definition must be a dict, got {type(definition).__name__}")
    qtype = definition.get("type")
    if not isinstance(qtype, str) or qtype not in QTYPES:  # str first: [] or {} must not reach the dict lookup
        raise _fail(qid, f"unknown type {qtype!r}; use one of {sorted(QTYPES)}")
    instructions = _instructions_text(qid, definition)
    criteria = definition.get("criteria")
    labels = _noul_labels(qid, qtype, definition.get("labels"))
    if qtype == "choice":
        criteria = _choice_criteria(qid, criteria)
        option_labels = tuple(criteria)
        legend = None
    elif qtype == "score":
        criteria = _score_levels(qid, criteria)
        option_labels = tuple(str(i) for i in range(len(criteria)))
        legend = _score_legend(qid, criteria)
    else:
        criteria = _noul_criteria(qid, criteria)
        option_labels = ("false", "true")
        legend = None
    texts = _option_texts(qid, qtype, criteria, labels, option_labels)
    order = _option_order(qid, definition.get("option_order"), len(texts))
    return Question(qid, qtype, instructions, texts, option_labels, legend, order)


def check_questions(questions: Any) -> list[Question]:
    """Validate a question dict; insertion order is row order and answer order."""
    if not isinstance(questions, dict):
        raise TypeError(f"questions must be a dict {{question_id: definition}}, not {type(questions).__name__}")
    return [check_question(qid, definition) for qid, definition in questions.items()]
