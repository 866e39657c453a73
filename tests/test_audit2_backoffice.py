"""Second-pass audit of compat-0.4.15 §5, §9, §12, §16, §17: pins for rules checked without an existing test.
Stub agents and hand-built records only: nothing here loads a checkpoint."""

import math
import warnings

import pytest

from laya.calibrate import fit_abstention_thresholds
from laya.router import Router


def _choice2(p: float, correct: bool) -> tuple:
    """A choice:2 record whose answer confidence is p (right or wrong)."""
    d = math.log(p / (1.0 - p))
    return (0, [d, 0.0], [1.0, 0.0] if correct else [0.0, 1.0], 2)


def test_r_cal_5_confidences_are_rounded_to_4_places_before_the_cut():
    # 0.800004 and 0.800001 are one candidate (0.8): the wrong answer is always accepted with the right one
    records = [_choice2(0.800004, True), _choice2(0.800001, False)]
    out = fit_abstention_thresholds(records, [1, 1, 1], {}, target_error=0.4, min_bucket_n=2, conservative=False)
    assert out == {"choice:2": 1.0}


def test_r_rt_11_typo_warning_comes_after_refusals_and_before_storing():
    r = Router()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError):
            r.register("englsh", 5)  # refused first: no warning for a registration that never happens
    assert caught == [] and "englsh" not in r.models
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning):
            r.register("englsh", "org/x")
    assert "englsh" not in r.models and r.registered == {}


def test_r_load_1_onnx_agent_names_the_checkpoint_the_caller_gave(tmp_path):
    # the ONNX agent's load errors name the id the caller passed, as the Agent's do, not the resolved folder
    from laya.onnx_agent import ONNXAgent

    (tmp_path / "sub").mkdir()
    with pytest.raises(FileNotFoundError) as e:
        ONNXAgent(str(tmp_path), subfolder="sub")
    assert str(e.value).startswith(f"Incompatible model: {str(tmp_path)!r} does not contain 'rl_agent_config.json'.")
