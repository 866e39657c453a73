"""The public surface of spec §1.1: lazy top-level names and their home modules, `laya.common`,
`laya.confidence` (min_confidence gate §2.4, Jev confidence §2.5)."""

import importlib
import subprocess
import sys

import pytest

import laya
from laya.confidence import (GATE_STATES, apply_confidence_gate, check_min_confidence_map, flag_low_confidence,
                             jev_confidence, resolve_min_confidence)

SOURCES = {
    "laya.calibrate": ["fit_temperatures", "fit_one_temperature", "fit_temperature_map", "fit_abstention_thresholds",
                       "fit_binning_map", "apply_binning_map"],
    "laya.common": ["proper_reward", "td_lambda_targets", "ece_score", "answer_confidence", "confidence_from_probs",
                    "render_options", "QTYPES", "QTYPE_NAMES"],
    "laya.confidence": ["check_min_confidence", "check_min_confidence_map", "resolve_min_confidence",
                        "flag_low_confidence", "apply_confidence_gate", "GATE_STATES", "jev_confidence"],
    "laya.hooks": ["AsyncHook", "BaseHook", "Hook", "OptionStabilityHook", "PredictContext", "PredictHook"],
    "laya.email": ["clean_email_body", "email_state"],
    "laya.shortlist": ["shortlist_choice", "predict_shortlist", "predict_tournament", "embed_fn_from_agent",
                       "cached_embed_fn"],
}
EAGER = {"render_options", "QTYPES", "QTYPE_NAMES", "AsyncHook", "BaseHook", "Hook", "OptionStabilityHook",
         "PredictContext", "PredictHook", "clean_email_body", "email_state"}  # pure Python: imported with laya


@pytest.mark.parametrize("module, name", [(m, n) for m, names in SOURCES.items() for n in names])
def test_top_level_name_comes_from_the_named_module(module, name):
    assert getattr(laya, name) is getattr(importlib.import_module(module), name)
    assert name in laya.__all__


def test_lazy_table_names_the_spec_sources():
    for module, names in SOURCES.items():
        for name in names:
            if name not in EAGER:
                assert laya._LAZY[name] == module


def test_fit_temperatures_is_a_module_alias():
    import laya.calibrate
    assert laya.fit_temperatures is laya.fit_temperature_map is laya.calibrate.fit_temperature_map


def test_one_implementation_each():
    import laya.answers
    import laya.calibrate
    import laya.common
    import laya.questions
    import laya.serve.jev
    import laya.train.objectives
    assert laya.check_min_confidence is laya.confidence.check_min_confidence  # answers: the None-passing adapter
    assert laya.jev_confidence is laya.serve.jev.jev_confidence
    assert laya.common.ece_score is laya.calibrate.ece_score
    assert laya.common.proper_reward is laya.train.objectives.proper_reward
    # compat R-P2-1: laya.common.render_options(q) takes a question; the (qtype, criteria) form still works
    q = {"type": "choice", "instructions": "x", "criteria": {"a": None, "b": "desc"}}
    assert laya.common.render_options(q) == laya.questions.render_options("choice", q["criteria"]) == ["a", "b: desc"]
    assert laya.common.QTYPES == {"choice": 0, "score": 1, "noul": 2}
    assert laya.common.QTYPE_NAMES == {0: "choice", 1: "score", 2: "noul"}


@pytest.mark.parametrize("name", ["confidence", "email", "hooks", "lang", "presets", "router", "structured"])
def test_spec_submodules_are_listed(name):
    assert name in laya.__all__ and getattr(laya, name).__name__ == f"laya.{name}"


def test_import_laya_and_the_torch_free_modules_do_not_import_torch():
    probe = ("import sys, laya, laya.common, laya.confidence; laya.jev_confidence; laya.ece_score; "
             "laya.fit_temperatures; laya.GATE_STATES; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_unknown_names_still_raise():
    common = importlib.import_module("laya.common")
    with pytest.raises(AttributeError):
        laya.no_such_name
    with pytest.raises(AttributeError):
        common.no_such_name


# ---- Jev confidence (§2.5) -------------------------------------------------------------------------

@pytest.mark.parametrize("answer, expected", [
    ({"type": "choice", "probabilities": {"a": 0.5, "b": 0.5}}, 0.0),
    ({"type": "choice", "probabilities": {"a": 0.7, "b": 0.2, "c": 0.1}}, round((0.7 - 1 / 3) / (2 / 3), 4)),
    # renormalised: (2, 2, 4) -> (.25, .25, .5)
    ({"type": "choice", "probabilities": {"a": 2.0, "b": 2.0, "c": 4.0}}, round((0.5 - 1 / 3) / (2 / 3), 4)),
    ({"type": "choice", "probabilities": {"only": 0.3}}, 1.0),
    ({"type": "score", "probabilities": {"0": 1.0}}, 1.0),
    ({"type": "score", "probabilities": {"0": 0.0, "1": 0.0, "2": 1.0}}, 1.0),
    ({"type": "score", "probabilities": {"0": 0.5, "1": 0.0, "2": 0.5}}, 0.0),
    ({"type": "score", "probabilities": {"0": 0.2, "1": 0.6, "2": 0.2}}, round(1 - 0.4 / (2 / 3), 4)),
    # renormalised score: (1, 3, 1) -> (.2, .6, .2)
    ({"type": "score", "probabilities": {"0": 1, "1": 3, "2": 1}}, round(1 - 0.4 / (2 / 3), 4)),
    # 4 levels, centre 1.5: uniform spread (1.5 + .5 + .5 + 1.5) / 4 = 1; mode 0, spread .5*3 = 1.5 -> 0
    ({"type": "score", "probabilities": {"0": 0.5, "1": 0.0, "2": 0.0, "3": 0.5}}, 0.0),
    ({"type": "noul", "noul": 0.9, "confidence": 0.9}, None),
    ({"type": "choice", "probabilities": {"a": -0.1, "b": 1.1}}, None),
    ({"type": "choice", "probabilities": {"a": True, "b": 0.0}}, None),
    ({"type": "score", "probabilities": {"0": float("nan"), "1": 0.5}}, None),
    ({"type": "score", "probabilities": {"0": float("inf"), "1": 0.5}}, None),
    ({"type": "choice", "probabilities": {"a": "0.7", "b": 0.3}}, 0.4),  # compat R-CONF-5: float() of each value
    ({"type": "choice", "probabilities": {"a": "x", "b": 0.5}}, None),
    ({"type": "choice", "probabilities": {"a": 0.0, "b": 0.0}}, 0.0),  # compat R-CONF-5: zero sum -> uniform
    ({"type": "choice", "probabilities": {}}, None),
    ({"type": "choice"}, None),
])
def test_jev_confidence(answer, expected):
    assert jev_confidence(answer) == expected


# ---- min_confidence map, resolution and the gate (§2.4) -------------------------------------------

def test_gate_states():
    assert GATE_STATES == ("passed", "abstained", "unevaluated")


def test_check_min_confidence_map_accepts_the_buckets_and_default():
    full = {f"{t}:{s}": 0.5 for t in ("choice", "score", "noul") for s in ("2", "3-5", "6-10", "11+")}
    assert check_min_confidence_map({**full, "default": 1}) == {**full, "default": 1.0}
    assert isinstance(check_min_confidence_map({"default": 0})["default"], float)


# compat-0.4.15 R-CONF-3 texts (these replaced our older wording)
@pytest.mark.parametrize("value, fragment", [
    (0.5, "a min_confidence map must be a non-empty dict of bucket -> float, got 0.5"),
    (None, "a min_confidence map must be a non-empty dict of bucket -> float, got None"),
    ({}, "a min_confidence map must be a non-empty dict of bucket -> float, got {}"),
    ([("default", 0.5)], "must be a non-empty dict"),
    ({"choice:12": 0.5}, "min_confidence map keys must be a bucket like 'choice:3-5' or 'default', got 'choice:12'"),
    ({"Default": 0.5}, "keys must be a bucket"),
    ({1: 0.5}, "keys must be a bucket like 'choice:3-5' or 'default', got 1"),
    ({"default": True}, "min_confidence must be a float in [0.0, 1.0], got True"),
    ({"noul:2": float("nan")}, "min_confidence must be a float in [0.0, 1.0], got nan"),
    ({"noul:2": float("inf")}, "must be a float in [0.0, 1.0]"),
    ({"score:3-5": 1.5}, "must be a float in [0.0, 1.0], got 1.5"),
    ({"score:3-5": -0.1}, "must be a float in [0.0, 1.0]"),
    ({"default": "0.5"}, "must be a float in [0.0, 1.0], got '0.5'"),
])
def test_check_min_confidence_map_refuses(value, fragment):
    with pytest.raises(ValueError) as err:
        check_min_confidence_map(value)
    assert fragment in str(err.value)


def test_resolve_min_confidence_fallbacks():
    """compat-0.4.15 R-CONF-1: resolve_min_confidence(answer, thresholds, default=0.0)."""
    m = {"choice:3-5": 0.7, "default": 0.4}
    choice3 = {"type": "choice", "probabilities": {"a": 0.5, "b": 0.3, "c": 0.2}}
    choice2 = {"type": "choice", "probabilities": {"a": 0.5, "b": 0.5}}
    assert resolve_min_confidence(choice3, m) == 0.7
    assert resolve_min_confidence(choice2, m) == 0.4  # unnamed bucket -> the map's default
    assert resolve_min_confidence({"type": "noul", "noul": 0.8}, {"choice:3-5": 0.7}) == 0.0  # -> default
    assert resolve_min_confidence({"type": "noul", "noul": 0.8}, {"choice:3-5": 0.7}, default=0.3) == 0.3
    assert resolve_min_confidence({"type": "noul", "noul": 0.8}, {"noul:2": 0.9}) == 0.9  # noul: k = 2
    score12 = {"type": "score", "probabilities": {str(i): 1 / 12 for i in range(12)}}
    assert resolve_min_confidence(score12, {"score:11+": 0.2, "score:6-10": 0.6}) == 0.2
    assert resolve_min_confidence({"type": "choice"}, {"choice:2": 0.9, "default": 0.1}) == 0.1  # no bucket


def _answers():
    return {
        "c": {"type": "choice", "choice": "a", "probabilities": {"a": 0.6, "b": 0.3, "c": 0.1},
              "confidence": 0.2, "answer_confidence": 0.6},
        "n": {"type": "noul", "noul": 0.95, "confidence": 0.95},  # no answer_confidence: falls back
        "s": {"type": "score", "score": 1.0, "probabilities": {"0": 0.1, "1": 0.8, "2": 0.1}, "confidence": 0.5,
              "answer_confidence": None},  # None -> falls back to confidence (§2.4)
    }


def test_flag_low_confidence_marks_a_list_of_results_in_place():
    """compat-0.4.15 R-CONF-1: a list of result dicts, in place, no abstention fields, returns None."""
    results = [{"answers": _answers()}]
    assert flag_low_confidence(results, 0.7) is None
    answer = results[0]["answers"]["c"]
    assert answer["low_confidence"] is True and "abstention" not in answer and "abstention_threshold" not in answer
    flag_low_confidence(results, {"choice:3-5": 0.5})  # re-gating clears the stale flag
    assert "low_confidence" not in answer
    untouched = [{"answers": _answers()}]
    flag_low_confidence(untouched, None)
    assert untouched == [{"answers": _answers()}]


def test_apply_confidence_gate_on_a_batch():
    results = [{"model": "laya-rl-agent", "answers": _answers(), "usage": {}}]
    assert apply_confidence_gate(results, {"choice:3-5": 0.65, "default": 0.9}) is None
    a = results[0]["answers"]
    assert (a["c"]["abstention"], a["c"]["abstention_threshold"], a["c"].get("low_confidence")) == \
        ("abstained", 0.65, True)
    assert (a["n"]["abstention"], a["n"]["abstention_threshold"], a["n"].get("low_confidence")) == \
        ("passed", 0.9, None)
    assert (a["s"]["abstention"], a["s"]["abstention_threshold"], a["s"].get("low_confidence")) == \
        ("abstained", 0.9, True)
    assert {x["abstention"] for x in a.values()} <= set(GATE_STATES)
    nothing = {"type": "noul", "noul": 0.5, "confidence": float("nan"), "answer_confidence": None}
    apply_confidence_gate([{"answers": {"x": nothing}}], 0.5)
    assert nothing["abstention"] == "unevaluated" and "low_confidence" not in nothing

    batch = [{"answers": _answers()}, {"answers": _answers()}]
    apply_confidence_gate(batch, 0.0)
    assert all(x["abstention"] in ("passed", "unevaluated") for r in batch for x in r["answers"].values())

    plain = [{"answers": _answers()}]
    apply_confidence_gate(plain, None)
    assert plain == [{"answers": _answers()}]
    with pytest.raises(ValueError):
        apply_confidence_gate([{"answers": {}}], float("nan"))


def test_langchain_runnables_are_lazy_names_of_laya_integrations():
    names = ["LayaRouter", "LayaGuardrail", "LayaGuardrailError", "LayaTriage", "LayaEvaluator", "LayaDecision"]
    # compat 0.4.15 §20: laya.__all__ lists them (laya.integrations imports without langchain_core)
    assert all(laya._LAZY[name] == "laya.integrations" and name in laya.__all__ for name in names)
    subprocess.run([sys.executable, "-c", "import sys; sys.modules['langchain_core'] = None; from laya import *"],
                   check=True, capture_output=True)
    integrations = importlib.import_module("laya.integrations")
    assert all(getattr(laya, name) is getattr(integrations, name) for name in names)


def test_jev_confidence_reads_score_levels_in_level_order():
    """A JSON round trip with sort_keys brings 12 levels back as '0','1','10','11','2',...: the value is the
    same as in level order (spec §2.5 measures |i - mode| between levels)."""
    import json

    p = [0.02, 0.03, 0.05, 0.1, 0.4, 0.2, 0.08, 0.05, 0.03, 0.02, 0.01, 0.01]
    answer = {"type": "score", "probabilities": {str(i): v for i, v in enumerate(p)}}
    shuffled = json.loads(json.dumps(answer, sort_keys=True))
    assert list(shuffled["probabilities"])[:4] == ["0", "1", "10", "11"]
    mode, centre = 4, 5.5
    expected = round(max(0.0, 1 - sum(v * abs(i - mode) for i, v in enumerate(p))
                         / (sum(abs(i - centre) for i in range(12)) / 12)), 4)
    assert jev_confidence(answer) == expected == jev_confidence(shuffled)
    assert jev_confidence({"type": "score", "probabilities": dict(enumerate(p))}) == expected  # int keys too
    # labels that are not level indexes keep their dict order (choice answers always do)
    choice = {"type": "choice", "probabilities": {"10": 0.7, "2": 0.3}}
    assert jev_confidence(choice) == round((0.7 - 0.5) / 0.5, 4)


def test_apply_confidence_gate_skips_what_is_not_a_dict():
    """compat-0.4.15 R-GATE-4: non-dict results and answers are skipped (our older gate refused them)."""
    results = [None, "nope", {"answers": ["x"]}, {"answers": {"z": None, "x": {"confidence": 0.1}}}]
    apply_confidence_gate(results, 0.5)
    assert results[:3] == [None, "nope", {"answers": ["x"]}] and results[3]["answers"]["z"] is None
    assert results[3]["answers"]["x"] == {"confidence": 0.1, "low_confidence": True, "abstention": "abstained",
                                          "abstention_threshold": 0.5}


def test_sequence_names_of_laya_common(tok):
    """§3.2/§3.3 under laya.common: raw definitions accepted, same rows as the request path builds."""
    from laya.questions import check_question
    from laya.sequence import DEFAULT_HEAD_MAX_LEN, build_head

    common = importlib.import_module("laya.common")
    q = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "money", "tech": None}}
    head = common.build_head(tok, q)
    assert head == build_head(tok, check_question("q", q), DEFAULT_HEAD_MAX_LEN)
    room = common.state_room(tok, q, 64)
    assert room == 64 - len(head.ids) - 1
    row = common.build_sequence(tok, "word " * 200, q, 64)
    assert len(row.ids) == 64 and row.ids[:len(head.ids)] == list(head.ids) and row.state_tokens_dropped > 0
    batch = common.collate_items([row, common.build_sequence(tok, "short", q, 64)], tok.pad_token_id)
    assert list(batch) == ["input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype"]
    assert batch["input_ids"].shape == (2, 64) and int(batch["attention_mask"][1].sum()) < 64
    with pytest.raises(ValueError, match="^question 'q': "):
        common.build_head(tok, {"type": "choice", "instructions": "x", "criteria": {}})


def test_router_exposes_resolve_model_spec():
    import laya.registry
    assert laya.router.resolve_model_spec is laya.registry.resolve_model_spec
    assert laya.router.resolve_model_spec("english") == laya.registry.DEFAULT_MODELS["english"]
