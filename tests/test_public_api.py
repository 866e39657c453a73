"""The public surface of spec §1.1: lazy top-level names and their home modules, `laya.common`,
`laya.confidence` (min_confidence gate §2.4, Jev confidence §2.5) and `td_lambda_targets` (§7.2)."""

import importlib
import math
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
}


@pytest.mark.parametrize("module, name", [(m, n) for m, names in SOURCES.items() for n in names])
def test_top_level_name_comes_from_the_named_module(module, name):
    assert getattr(laya, name) is getattr(importlib.import_module(module), name)
    assert name in laya.__all__


def test_lazy_table_names_the_spec_sources():
    for module, names in SOURCES.items():
        for name in names:
            if name not in ("render_options", "QTYPES", "QTYPE_NAMES"):  # eager (pure Python) at top level
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
    assert laya.common.td_lambda_targets is laya.train.objectives.td_lambda_targets
    assert laya.common.render_options is laya.questions.render_options
    assert laya.common.QTYPES == {"choice": 0, "score": 1, "noul": 2}
    assert laya.common.QTYPE_NAMES == {0: "choice", 1: "score", 2: "noul"}


def test_confidence_is_a_listed_submodule():
    assert "confidence" in laya.__all__ and laya.confidence.__name__ == "laya.confidence"


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
              "answer_confidence": None},  # unusable -> unevaluated
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
    assert a["s"]["abstention"] == "unevaluated" and "low_confidence" not in a["s"]
    assert {x["abstention"] for x in a.values()} <= set(GATE_STATES)

    batch = [{"answers": _answers()}, {"answers": _answers()}]
    apply_confidence_gate(batch, 0.0)
    assert all(x["abstention"] in ("passed", "unevaluated") for r in batch for x in r["answers"].values())

    plain = {"answers": _answers()}
    assert apply_confidence_gate(plain, None) == {"answers": _answers()}
    with pytest.raises(ValueError):
        apply_confidence_gate({"answers": {}}, float("nan"))


# ---- td_lambda_targets (§7.2) ---------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _episode_batch():
    # rows: 0..2 episode 7 (shuffled: steps 2, 0, 1), 3 outside any episode, 4..5 episode 3 (steps 5, 9)
    target = torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.3, 0.7], [0.5, 0.5], [0.8, 0.2]])
    return {"target": target, "ep_group": torch.tensor([7, 7, 7, -1, 3, 3]),
            "ep_step": torch.tensor([2, 0, 1, 0, 5, 9]), "qtype": torch.tensor([2, 2, 2, 0, 2, 2])}


P_TRUE = torch.tensor([0.9, 0.2, 0.4, 0.5, 0.6, 0.1])


def _expected(lam):
    # episode 7 in step order: rows 1, 2, 0; outcome y = gold P(true) of row 0 = 1.0
    g0 = 1.0
    g2 = (1 - lam) * P_TRUE[0].item() + lam * g0
    g1 = (1 - lam) * P_TRUE[2].item() + lam * g2
    # episode 3: rows 4, 5; outcome y = 0.2
    h5 = 0.2
    h4 = (1 - lam) * P_TRUE[5].item() + lam * h5
    g = {0: g0, 1: g1, 2: g2, 4: h4, 5: h5}
    rows = [[1 - g[r], g[r]] if r in g else [0.3, 0.7] for r in range(6)]
    return torch.tensor(rows)


@pytest.mark.parametrize("lam", [1.0, 0.0, 0.5, 0.25])
def test_td_lambda_targets_hand_computed(lam):
    batch = _episode_batch()
    before = batch["target"].clone()
    out = laya.td_lambda_targets(P_TRUE, batch, lam=lam)
    assert torch.allclose(out, _expected(lam), atol=1e-6)
    assert torch.equal(batch["target"], before)  # a new tensor; the batch is untouched


def test_td_lambda_lam1_is_the_monte_carlo_outcome_and_lam0_one_step():
    out = laya.td_lambda_targets(P_TRUE, _episode_batch(), lam=1)
    assert out[[0, 1, 2], 1].tolist() == [1.0, 1.0, 1.0]
    assert torch.allclose(out[[4, 5], 1], torch.tensor([0.2, 0.2]))
    out = laya.td_lambda_targets(P_TRUE, _episode_batch(), lam=0)
    # each turn learns the model's next-turn P(true); the last turn the outcome
    assert torch.allclose(out[[1, 2, 0], 1], torch.tensor([0.4, 0.9, 1.0]))
    assert torch.allclose(out[:, 0] + out[:, 1], torch.ones(6))


def test_td_lambda_default_lam_is_one_and_default_p_true_never_gets_a_gradient():
    p = P_TRUE.clone().requires_grad_(True)
    out = laya.td_lambda_targets(p, _episode_batch())
    assert not out.requires_grad
    assert torch.allclose(out, _expected(1.0))


def test_td_lambda_without_episodes_returns_a_copy():
    batch = {"target": torch.tensor([[0.2, 0.8], [1.0, 0.0]])}
    out = laya.td_lambda_targets(torch.tensor([0.1, 0.2]), batch, lam=0.0)
    assert torch.equal(out, batch["target"]) and out is not batch["target"]
    batch["ep_group"] = torch.tensor([-1, -1])
    batch["ep_step"] = torch.tensor([0, 0])
    assert torch.equal(laya.td_lambda_targets(torch.tensor([0.1, 0.2]), batch, lam=0.0), batch["target"])


def test_td_lambda_accepts_lists_and_attribute_batches():
    class B:
        target = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # K = 3 columns (padding after the two noul slots)
        ep_group = [0, 0]
        ep_step = [0, 1]
    out = laya.td_lambda_targets([0.3, 0.6], B(), lam=0.0)
    assert torch.allclose(out, torch.tensor([[0.4, 0.6, 0.0], [0.0, 1.0, 0.0]]))


@pytest.mark.parametrize("lam", [-0.1, 1.5, float("nan"), True, "1"])
def test_td_lambda_refuses_bad_lam(lam):
    with pytest.raises(ValueError, match="lam"):
        laya.td_lambda_targets(P_TRUE, _episode_batch(), lam=lam)


def test_td_lambda_refuses_bad_batches():
    batch = _episode_batch()
    batch["ep_step"] = torch.tensor([1, 0, 1, 0, 5, 9])
    with pytest.raises(ValueError, match="repeats an ep_step"):
        laya.td_lambda_targets(P_TRUE, batch)
    batch = _episode_batch()
    batch["qtype"] = torch.tensor([2, 0, 2, 0, 2, 2])
    with pytest.raises(ValueError, match="not a noul question"):
        laya.td_lambda_targets(P_TRUE, batch)
    batch = _episode_batch()
    del batch["ep_step"]
    with pytest.raises(ValueError, match="no 'ep_step'"):
        laya.td_lambda_targets(P_TRUE, batch)
    with pytest.raises(ValueError, match="rows"):
        laya.td_lambda_targets(P_TRUE[:5], _episode_batch())
    with pytest.raises(ValueError, match="no 'target'"):
        laya.td_lambda_targets(P_TRUE, {})
    assert math.isfinite(float(laya.td_lambda_targets(P_TRUE, _episode_batch()).sum()))
