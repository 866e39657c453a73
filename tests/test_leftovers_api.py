"""Leftovers in the Python API: the one number predicate, batch errors naming the bad state, integral
budgets from numpy, and flags that must be real bools."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import pytest

from laya.answers import clamp_temperature, positive_int, temperature_rejected
from laya.calibrate import fit_abstention_thresholds, fit_temperature_map, predictions
from laya.confidence import answer_confidence_value
from laya.integrations.controls import check_threshold, is_number
from laya.numeric import is_real

Q = {"q": {"type": "choice", "instructions": "Which one?", "criteria": ["a", "b"]}}
Q2 = {"n": {"type": "noul", "instructions": "Is it urgent?"}}

# ---- 1: one number predicate; each caller answers as it did before ------------------------------------------

# value -> (confidence: finite, answers: any real, calibrate: positive finite, controls: finite int/float)
CASES = [
    ("True", True, False, False, False, False),
    ("False", False, False, False, False, False),
    ("int", 1, True, True, True, True),
    ("huge int", 10 ** 400, False, True, False, False),  # controls raised OverflowError, calibrate overflowed later
    ("-huge int", -10 ** 400, False, True, False, False),  # (same)
    ("float", 0.5, True, True, True, True),
    ("nan", math.nan, False, True, False, False),
    ("inf", math.inf, False, True, False, False),
    ("-inf", -math.inf, False, True, False, False),
    ("-1", -1, True, True, False, True),
    ("0", 0, True, True, False, True),
    ("0.0", 0.0, True, True, False, True),
    ("Decimal", Decimal("0.5"), False, False, False, False),
    ("Fraction", Fraction(1, 2), True, True, True, False),
    ("str", "0.5", False, False, False, False),
    ("None", None, False, False, False, False),
]
try:
    import numpy as np

    CASES += [
        ("np.float64", np.float64(0.5), True, True, True, True),
        ("np.float32", np.float32(0.5), True, True, True, False),
        ("np.int64", np.int64(3), True, True, True, False),
        ("np.int64 -2", np.int64(-2), True, True, False, False),
        ("np.bool_", np.bool_(True), False, False, False, False),
        ("np.nan", np.float64("nan"), False, True, False, False),
        ("np.inf32", np.float32("inf"), False, True, False, False),
    ]
except ImportError:  # pragma: no cover - numpy is a laya dependency
    pass


@pytest.mark.parametrize("name, value, usable, real, positive, plain", CASES, ids=[c[0] for c in CASES])
def test_each_caller_keeps_its_number_rule(name, value, usable, real, positive, plain):
    assert (answer_confidence_value({"answer_confidence": value}) is not None) is usable
    assert is_real(value, finite=True) is usable
    assert is_real(value) is real
    assert temperature_rejected(value, value) is (not real or value != value)
    assert (is_real(value, finite=True, positive=True) and float(value) > 0) is positive  # calibrate's rule
    if positive:
        predictions([], temperature=(value, 1.0, 1.0))
    else:
        with pytest.raises(ValueError, match="^temperature must be 3 positive finite numbers"):
            predictions([], temperature=(value, 1.0, 1.0))
    assert is_number(value) is plain


def test_a_huge_int_threshold_is_the_value_error_not_an_overflow():
    with pytest.raises(ValueError, match=r"^threshold must be a probability in \[0, 1\]; got 1000"):
        check_threshold(10 ** 400)


# ---- 2: a bad state in a batch names its index ---------------------------------------------------------------

@pytest.mark.parametrize("bad, error, start", [
    (3, TypeError, "state must be a str, dict or list, not int"),
    (None, TypeError, "states must not contain None; pass a str, dict or list per state"),
    ({"a": {1}}, TypeError, "state is not JSON data"),
    ("x\ud800", ValueError, "state contains a lone surrogate U+D800"),
])
def test_predict_batch_names_the_bad_state(agent, bad, error, start):
    with pytest.raises(error) as e:
        agent.predict_batch(["fine", "also fine", bad], Q)
    assert str(e.value).startswith(start) and str(e.value).endswith(" (at states[2])"), str(e.value)


def test_a_single_state_error_has_no_index(agent):
    with pytest.raises(TypeError) as e:
        agent.predict(3, Q)
    assert "(at " not in str(e.value)


@pytest.fixture()
def router(agent, tiny_checkpoint):
    from laya.router import Router

    r = Router(models={"support": tiny_checkpoint}, default="support", device="cpu")
    r.attach("support", agent)
    return r


def test_router_batch_names_the_request_not_the_sub_group_index(router):
    # request 2 is the second state of the Q2 sub-group: the agent alone would say states[1]
    requests = [{"state": "fine", "questions": Q, "model": "support"},
                {"state": "fine", "questions": Q2, "model": "support"},
                {"state": {"a": {1}}, "questions": Q2, "model": "support"}]
    with pytest.raises(TypeError) as e:
        router.predict_batch(requests)
    assert str(e.value).startswith("state is not JSON data") and str(e.value).endswith(" (at request 2)")


def test_router_batch_names_a_lone_bad_state_too(router):
    requests = [{"state": "fine", "questions": Q, "model": "support"},
                {"state": 7, "questions": Q2, "model": "support"}]
    with pytest.raises(TypeError, match=r"^state must be a str, dict or list, not int; .* \(at request 1\)$"):
        router.predict_batch(requests)


def test_serve_batch_names_the_state_of_a_type_error():
    from laya.serve.errors import ApiError
    from laya.serve.schema import parse_batch

    with pytest.raises(ApiError) as e:
        parse_batch({"states": ["fine", 5], "questions": Q}, [])
    assert e.value.status == 422
    assert e.value.detail.startswith("state must be a str, dict or list, not int") and \
        e.value.detail.endswith(" (at states[1])"), e.value.detail


# ---- 3: any integral number is a budget ----------------------------------------------------------------------

def test_numpy_integers_are_budgets(agent):
    np = pytest.importorskip("numpy")
    states = ["one short state", "a second, somewhat longer state to sort"]
    want = agent.predict_batch(states, Q, max_len=64, head_max_len=32, batch_size=1)
    got = agent.predict_batch(states, Q, max_len=np.int64(64), head_max_len=np.int32(32), batch_size=np.int16(1))
    assert got == want
    value = positive_int(np.int64(5), "max_len")
    assert value == 5 and type(value) is int


@pytest.mark.parametrize("bad", [0, -3, 64.0, "64", True, Fraction(64, 1)])
def test_other_budgets_keep_the_message(agent, bad):
    with pytest.raises(ValueError, match=rf"^max_len must be a positive integer, got {re.escape(repr(bad))}$"):
        agent.predict_batch(["x"], Q, max_len=bad)


def test_numpy_non_integers_are_refused():
    np = pytest.importorskip("numpy")
    for bad in (np.float64(64.0), np.bool_(True), np.int64(0)):
        with pytest.raises(ValueError, match="^max_len must be a positive integer, got "):
            positive_int(bad, "max_len")


# ---- 6: boolean flags must be bools ---------------------------------------------------------------------------

def test_truthy_strings_are_not_flags(agent, router):
    cases = [
        ("sort_by_length", lambda v: agent.predict_batch(["x", "y"], Q, batch_size=1, sort_by_length=v)),
        ("sort_by_length", lambda v: router.predict_batch([{"state": "x", "questions": Q}], sort_by_length=v)),
        ("explain", lambda v: router.route("x", explain=v)),
        ("explain", lambda v: router.route_batch([{"state": "x", "questions": Q}], explain=v)),
        ("strict", lambda v: agent.set_backend("eager", strict=v)),
        ("use_graphs", lambda v: agent.accelerate(use_graphs=v)),
        ("compute_ece", lambda v: fit_temperature_map([], compute_ece=v)),
        ("compute_ece", lambda v: agent.fit_temperatures([], compute_ece=v)),
        ("conservative", lambda v: fit_abstention_thresholds([], [1.0, 1.0, 1.0], None, conservative=v)),
    ]
    before = agent.backend
    for name, call in cases:
        for bad in ("no", "false", b"yes"):
            with pytest.raises(TypeError, match=rf"^{name} must be True or False, got {re.escape(repr(bad))}$"):
                call(bad)
    assert agent.backend == before  # a refused flag changes nothing



def test_calibration_temperatures_must_divide_as_floats():
    # 10**400 overflowed and Fraction(1, 10**400) divided by zero inside the fits: now the fits' ValueError
    from fractions import Fraction

    for t in (10 ** 400, Fraction(10 ** 400), 2 ** 1024, Fraction(1, 10 ** 400)):
        with pytest.raises(ValueError, match="temperature must be 3 positive finite numbers"):
            fit_abstention_thresholds([(0, [1.0, 0.2], [1.0, 0.0])] * 3, [t, 1.0, 1.0], None, min_bucket_n=1)


def test_numpy_time_values_are_not_numbers():
    import numpy as np

    for value in (np.timedelta64(2), np.timedelta64(2, "s")):
        assert not is_real(value) and not is_real(value, finite=True)
    assert clamp_temperature(np.timedelta64(2)) == 1.0
