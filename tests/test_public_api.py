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
    assert laya.check_min_confidence is laya.answers.check_min_confidence
    assert laya.jev_confidence is laya.serve.jev.jev_confidence
    assert laya.common.ece_score is laya.calibrate.ece_score
    assert laya.common.proper_reward is laya.train.objectives.proper_reward
    assert laya.common.render_options is laya.questions.render_options
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
    ({"type": "choice", "probabilities": {"a": "0.5", "b": 0.5}}, None),
    ({"type": "choice", "probabilities": {"a": 0.0, "b": 0.0}}, None),
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
    assert check_min_confidence_map({}) == {}
    assert isinstance(check_min_confidence_map({"default": 0})["default"], float)


@pytest.mark.parametrize("value, fragment", [
    (0.5, "must be a dict"),
    (None, "must be a dict"),
    ([("default", 0.5)], "must be a dict"),
    ({"choice:12": 0.5}, "min_confidence key 'choice:12' is not a bucket"),
    ({"Default": 0.5}, "is not a bucket"),
    ({1: 0.5}, "is not a bucket"),
    ({"default": True}, "min_confidence['default'] must be a number between 0 and 1, got True"),
    ({"noul:2": float("nan")}, "min_confidence['noul:2'] must be a number between 0 and 1"),
    ({"noul:2": float("inf")}, "must be a number between 0 and 1"),
    ({"score:3-5": 1.5}, "must be a number between 0 and 1, got 1.5"),
    ({"score:3-5": -0.1}, "must be a number between 0 and 1"),
    ({"default": "0.5"}, "must be a number between 0 and 1"),
])
def test_check_min_confidence_map_refuses(value, fragment):
    with pytest.raises(ValueError) as err:
        check_min_confidence_map(value)
    assert fragment in str(err.value)


def test_resolve_min_confidence_fallbacks():
    m = {"choice:3-5": 0.7, "default": 0.4}
    assert resolve_min_confidence(m, "choice:3-5") == 0.7
    assert resolve_min_confidence(m, "choice:2") == 0.4  # unnamed bucket -> default
    assert resolve_min_confidence({"choice:3-5": 0.7}, "noul:2") == 0.0  # no default -> 0.0
    assert resolve_min_confidence(0.3, "score:11+") == 0.3  # a float applies everywhere
    assert resolve_min_confidence(None, "score:11+") == 0.0
    # an answer's bucket: k from len(probabilities), 2 for noul
    choice3 = {"type": "choice", "probabilities": {"a": 0.5, "b": 0.3, "c": 0.2}}
    assert resolve_min_confidence(m, choice3) == 0.7
    assert resolve_min_confidence({"noul:2": 0.9}, {"type": "noul", "noul": 0.8}) == 0.9
    score12 = {"type": "score", "probabilities": {str(i): 1 / 12 for i in range(12)}}
    assert resolve_min_confidence({"score:11+": 0.2, "score:6-10": 0.6}, score12) == 0.2
    with pytest.raises(ValueError, match="bucket name"):
        resolve_min_confidence(m, "choice:12")
    with pytest.raises(ValueError, match="between 0 and 1"):
        resolve_min_confidence(1.2, "choice:2")
    with pytest.raises(ValueError, match="not a bucket"):
        resolve_min_confidence({"chioce:2": 0.2}, "choice:2")


def _answers():
    return {
        "c": {"type": "choice", "choice": "a", "probabilities": {"a": 0.6, "b": 0.3, "c": 0.1},
              "confidence": 0.2, "answer_confidence": 0.6},
        "n": {"type": "noul", "noul": 0.95, "confidence": 0.95},  # no answer_confidence: falls back
        "s": {"type": "score", "score": 1.0, "probabilities": {"0": 0.1, "1": 0.8, "2": 0.1}, "confidence": 0.5,
              "answer_confidence": None},  # None -> falls back to confidence (§2.4)
    }


def test_flag_low_confidence_writes_the_abstention_fields_in_place():
    answer = _answers()["c"]
    assert flag_low_confidence(answer, 0.7) is answer
    assert answer["abstention"] == "abstained" and answer["abstention_threshold"] == 0.7
    assert answer["low_confidence"] is True
    flag_low_confidence(answer, {"choice:3-5": 0.5})  # re-gating clears the stale flag
    assert answer["abstention"] == "passed" and answer["abstention_threshold"] == 0.5
    assert "low_confidence" not in answer
    untouched = _answers()["c"]
    assert flag_low_confidence(untouched, None) == _answers()["c"]


def test_apply_confidence_gate_on_a_result_and_a_batch():
    result = {"model": "laya-rl-agent", "answers": _answers(), "usage": {}}
    assert apply_confidence_gate(result, {"choice:3-5": 0.65, "default": 0.9}) is result
    a = result["answers"]
    assert (a["c"]["abstention"], a["c"]["abstention_threshold"], a["c"].get("low_confidence")) == \
        ("abstained", 0.65, True)
    assert (a["n"]["abstention"], a["n"]["abstention_threshold"], a["n"].get("low_confidence")) == \
        ("passed", 0.9, None)
    assert (a["s"]["abstention"], a["s"]["abstention_threshold"], a["s"].get("low_confidence")) == \
        ("abstained", 0.9, True)
    assert {x["abstention"] for x in a.values()} <= set(GATE_STATES)
    nothing = {"type": "noul", "noul": 0.5, "confidence": float("nan"), "answer_confidence": None}
    assert flag_low_confidence(nothing, 0.5)["abstention"] == "unevaluated" and "low_confidence" not in nothing

    batch = [{"answers": _answers()}, {"answers": _answers()}]
    apply_confidence_gate(batch, 0.0)
    assert all(x["abstention"] in ("passed", "unevaluated") for r in batch for x in r["answers"].values())

    plain = {"answers": _answers()}
    assert apply_confidence_gate(plain, None) == {"answers": _answers()}
    with pytest.raises(ValueError):
        apply_confidence_gate({"answers": {}}, float("nan"))


def test_langchain_runnables_are_lazy_names_of_laya_integrations():
    names = ["LayaRouter", "LayaGuardrail", "LayaGuardrailError", "LayaTriage", "LayaEvaluator", "LayaDecision"]
    assert all(laya._LAZY[name] == "laya.integrations" and name not in laya.__all__ for name in names)
    # star-import must work without the langchain extra
    subprocess.run([sys.executable, "-c", "from laya import *"], check=True, capture_output=True)
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="langchain-core"):
            laya.LayaRouter
    else:
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


@pytest.mark.parametrize("result, error, fragment", [
    ({"answers": {"z": None, "x": {"type": "noul", "noul": 0.9}}}, TypeError, "answer 'z' must be an answer dict"),
    ({"answers": {"x": {"noul": 0.9, "confidence": 0.9}}}, ValueError, "answer 'x' has no \"type\""),
    ({"answers": {"x": {"type": "yesno", "confidence": 0.9}}}, ValueError, "answer 'x' has \"type\" 'yesno'"),
    ({"answers": {"x": {"type": "choice", "probabilities": None, "confidence": 0.9}}}, ValueError,
     "answer 'x': 'probabilities' must be a dict"),
    ({"answers": ["nope"]}, TypeError, "'answers' must be a dict"),
    ([{"answers": {}}, "nope"], TypeError, "result 1 must be a dict"),
    ([{"answers": {}}, {"answers": {"q7": {"confidence": 0.1}}}], ValueError, "result 1: answer 'q7' has no"),
])
def test_apply_confidence_gate_validates_everything_before_writing(result, error, fragment):
    import copy

    first = _answers()
    if isinstance(result, dict):
        result["answers"] = {**first, **result["answers"]} if isinstance(result["answers"], dict) else result["answers"]
    else:
        result[0]["answers"] = first
    before = copy.deepcopy(result)
    with pytest.raises(error) as err:
        apply_confidence_gate(result, 0.5)
    assert fragment in str(err.value)
    assert result == before  # the answers before the bad one were not gated


def test_flag_low_confidence_names_a_missing_type():
    with pytest.raises(ValueError, match='answer has no "type"'):
        flag_low_confidence({"confidence": 0.3}, 0.5)
    with pytest.raises(TypeError, match="answer must be an answer dict, got list"):
        flag_low_confidence([], 0.5)


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
    row = common.build_sequence(tok, q, "word " * 200, 64)
    assert len(row.ids) == 64 and row.ids[:len(head.ids)] == list(head.ids) and row.state_tokens_dropped > 0
    batch = common.collate_items([row, common.build_sequence(tok, q, "short", 64)], tok.pad_token_id)
    assert list(batch) == ["input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype"]
    assert batch["input_ids"].shape == (2, 64) and int(batch["attention_mask"][1].sum()) < 64
    with pytest.raises(ValueError, match="^question 'q': "):
        common.build_head(tok, {"type": "choice", "instructions": "x", "criteria": {}})


def test_router_exposes_resolve_model_spec():
    import laya.registry
    assert laya.router.resolve_model_spec is laya.registry.resolve_model_spec
    assert laya.router.resolve_model_spec("english") == laya.registry.DEFAULT_MODELS["english"]
