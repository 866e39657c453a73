"""compat-0.4.15 §9: laya.calibrate payload helpers, their ValueErrors, record validation, fitter
arguments, report keys and constants."""

import json
import types
import warnings

import numpy as np
import pytest

import laya.calibrate as cal
from laya.calibrate import (apply_calibration_payload, calibration_payload, check_records, fit_abstention_thresholds,
                            fit_binning_map, fit_temperature_map)


def agent_like(**kw):
    base = dict(temperature=[1.0, 1.0, 1.0], temperature_by_options={}, binning_map=None, model_id_or_path="m",
                subfolder=None, cfg={"max_len": 64, "temperature": [2, 2, 2]})
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_constants():
    assert (cal.CALIBRATION_VERSION, cal.MIN_BUCKET_N, cal.MIN_TYPE_N, cal.MIN_ABSTAIN_BUCKET_N,
            cal.MIN_BINNING_BUCKET_N, cal.ECE_HOLDOUT_FRAC, cal.LOG_T_MARGIN, cal.N_QTYPES) == \
        (2, 2000, 10, 100, 200, 0.2, 10.0, 3)
    assert (cal.TEMP_MIN, cal.TEMP_MAX) == (0.5, 5.0)


def test_calibration_payload_shape():
    p = calibration_payload([1, 2, 3], {"choice:2": 1}, "org/m", "en", {"max_len": 64, "temperature": [1, 1, 1],
                                                                       "temperature_by_options": {}})
    assert p == {"version": 2, "temperature": [1.0, 2.0, 3.0], "temperature_by_options": {"choice:2": 1.0},
                 "model_id_or_path": "org/m", "subfolder": "en", "config": {"max_len": 64}}
    assert calibration_payload([1, 1, 1], {})["config"] is None and "binning_map" not in calibration_payload([1, 1, 1], {})
    bm = {"choice:2": {"bins": 2, "values": [0.2, 0.9]}}
    assert calibration_payload([1, 1, 1], {}, binning_map=bm)["binning_map"] == bm


def test_apply_installs_raw_and_clamped_and_clears_binning():
    obj = agent_like(binning_map={"x": {"bins": 1, "values": [0.5]}})
    payload = {"version": 2, "temperature": [0.1, 2.0, 9.0], "temperature_by_options": {"choice:2": 1.5},
               "model_id_or_path": "m", "subfolder": None, "config": {"max_len": 64}}
    with pytest.warns(RuntimeWarning, match=r"^laya: calibration temperatures are invalid or outside \[0\.5, 5\]; using "):
        apply_calibration_payload(obj, payload)
    assert obj.temperature == [0.5, 2.0, 5.0] and obj.temperature_raw == [0.1, 2.0, 9.0]
    assert obj.temperature_by_options == {"choice:2": 1.5} and obj.temperature_by_options_raw == {"choice:2": 1.5}
    assert obj.binning_map is None


def test_apply_identity_warning_only_when_it_differs():
    same = {"version": 2, "temperature": [1, 1, 1], "model_id_or_path": "m", "subfolder": None,
            "config": {"max_len": 64}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_calibration_payload(agent_like(), same)
        apply_calibration_payload(agent_like(), {"temperature": [1, 1, 1], "model_id_or_path": "other"})  # v1
    with pytest.warns(UserWarning, match=r"^calibration was fitted for model_id_or_path="):
        apply_calibration_payload(agent_like(), {**same, "model_id_or_path": "other"})
    with pytest.warns(UserWarning, match=r"^calibration was fitted for model_id_or_path="):
        apply_calibration_payload(agent_like(), {**same, "config": {"max_len": 32}})


@pytest.mark.parametrize("payload, text", [
    ([], "calibration JSON must be an object, got list"),
    ({"version": "x", "temperature": [1, 1, 1]}, "calibration JSON version must be an integer, got 'x'"),
    ({"version": 1.5, "temperature": [1, 1, 1]}, "calibration JSON version must be an integer, got 1.5"),
    ({"version": 1}, "calibration JSON must contain temperature: [3 floats]"),
    ({"temperature": [1, 1]}, "calibration JSON must contain temperature: [3 floats]"),
    ({"temperature": [1, 1, 1], "temperature_by_options": []},
     "calibration JSON temperature_by_options must be an object of bucket -> float, got list"),
    ({"temperature": [1, 1, 1], "binning_map": []},
     "calibration JSON binning_map must be an object of bucket -> {bins, values}, got list"),
    ({"temperature": [1, 1, 1], "binning_map": {"c": 3}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 0, "values": []}}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 2.0, "values": [0, 1]}}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 2, "values": [0.5]}}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 1, "values": [True]}}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 1, "values": [float("nan")]}}}, "calibration JSON binning_map['c'] "),
    ({"temperature": [1, 1, 1], "binning_map": {"c": {"bins": 1, "values": [1.5]}}}, "calibration JSON binning_map['c'] "),
])
def test_apply_refuses_malformed_payloads(payload, text):
    obj = agent_like()
    with pytest.raises(ValueError) as e:
        apply_calibration_payload(obj, payload)
    assert str(e.value).startswith(text)
    assert obj.temperature == [1.0, 1.0, 1.0]  # nothing installed


def test_apply_accepts_version_spellings():
    for version in (None, 1, 2, 2.0, "2", " 1 "):
        apply_calibration_payload(agent_like(), {"version": version, "temperature": [1, 1, 1], "model_id_or_path": "m",
                                                 "subfolder": None, "config": {"max_len": 64}})


GOOD = (0, [1.0, 2.0, 0.5], [0.0, 1.0, 0.0], 3)


@pytest.mark.parametrize("record, text", [
    ((0, [1.0], [1.0], 1, 9), "record must be (qtype, logits, target[, k])"),
    ("abc", "record must be (qtype, logits, target[, k])"),
    ((True, [1.0], [1.0]), "qtype must be an integer between 0 and 2"),
    ((0.5, [1.0], [1.0]), "qtype must be an integer between 0 and 2"),
    ((-1, [1.0], [1.0]), "qtype must be an integer between 0 and 2"),
    ((3, [1.0], [1.0]), "qtype must be an integer between 0 and 2"),
    ((0, [1.0, 2.0], [1.0, 0.0], None), "k must be an integer between 1 and the vector length"),
    ((0, [1.0, 2.0], [1.0, 0.0], True), "k must be an integer between 1 and the vector length"),
    ((0, [1.0, 2.0], [1.0, 0.0], 1.5), "k must be an integer between 1 and the vector length"),
    ((0, [1.0, 2.0], [1.0, 0.0], 0), "k must be an integer between 1 and the vector length"),
    ((0, [1.0, 2.0], [1.0, 0.0], 3), "k must be an integer between 1 and the vector length"),
    ((0, [[1.0]], [1.0]), "logits must be a one-dimensional numeric vector"),
    ((0, ["a", "b"], [1.0, 0.0]), "logits must be a one-dimensional numeric vector"),
    ((0, [1.0, 2.0], "ab"), "target must be a one-dimensional numeric vector"),
    ((0, [1.0, float("inf")], [1.0, 0.0]), "logits must contain only finite values"),
    ((0, [1.0, 2.0], [float("nan"), 1.0]), "target must contain only finite values"),
    ((0, [1.0, 2.0], [1.0, 0.0, 0.0]), "logits and target must have the same length"),
    ((0, [1.0, 2.0], [1.5, -0.5]), "target must be a nonnegative probability vector summing to 1"),
    ((0, [1.0, 2.0], [0.5, 0.4]), "target must be a nonnegative probability vector summing to 1"),
])
def test_record_validation(record, text):
    with pytest.raises(ValueError) as e:
        check_records([GOOD, record])
    assert str(e.value).startswith(text) and "(records[1])" in str(e.value)
    for fit in (lambda r: fit_temperature_map(r), lambda r: fit_binning_map(r, [1, 1, 1], {}),
                lambda r: fit_abstention_thresholds(r, [1, 1, 1], {})):
        with pytest.raises(ValueError):
            fit([GOOD, record])


def test_records_accept_integral_floats_and_three_items():
    rec = check_records([(1.0, np.array([1.0, 2.0]), [0.0, 1.0]), (np.int64(2), [0.0, 1.0], [1, 0], 2.0)])
    assert [(q, k) for q, _, _, k in rec] == [(1, 2), (2, 2)]


def records(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        z = rng.normal(0, 2.0, size=3)
        p = np.exp(z - z.max())
        p /= p.sum()
        out.append((0, z, np.eye(3)[rng.choice(3, p=p)], 3))
    return out


def test_abstention_arguments_and_rule():
    rec = records(300)
    for bad in (True, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"^target_error must be in \[0\.0, 1\.0\], got "):
            fit_abstention_thresholds(rec, [1, 1, 1], {}, target_error=bad)
    for bad in (0, 2.5, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match=r"^min_bucket_n must be a positive integer, got "):
            fit_abstention_thresholds(rec, [1, 1, 1], {}, min_bucket_n=bad)
        with pytest.raises(ValueError, match=r"^min_bucket_n must be a positive integer, got "):
            fit_binning_map(rec, [1, 1, 1], {}, min_bucket_n=bad)
    with pytest.raises(ValueError, match=r"^bins must be an integer of at least 1, got 0"):
        fit_binning_map(rec, [1, 1, 1], {}, bins=0)
    out = fit_abstention_thresholds(rec, [1, 1, 1], {}, target_error=0.2)
    assert list(out) == ["choice:3-5"]  # no "default"
    conf, correct = cal.predictions(rec)
    conf = np.round(conf, 4)
    for conservative in (True, False):
        cut = fit_abstention_thresholds(rec, [1, 1, 1], {}, target_error=0.2, conservative=conservative)["choice:3-5"]
        kept = conf >= cut
        errors, n = int((~correct[kept]).sum()), int(kept.sum())
        assert ((errors + 1) / (n + 1) if conservative else errors / n) <= 0.2
        lower = conf[conf < cut]
        if lower.size:  # the next lower candidate does not qualify
            k2 = conf >= lower.max()
            e2, n2 = int((~correct[k2]).sum()), int(k2.sum())
            assert ((e2 + 1) / (n2 + 1) if conservative else e2 / n2) > 0.2
    assert fit_abstention_thresholds(rec, [1, 1, 1], {}, target_error=0.0) == {"choice:3-5": 1.0}
    assert fit_abstention_thresholds(rec[:50], [1, 1, 1], {}) == {}  # below the bucket floor


def test_temperature_map_keys_and_seed():
    rec = records(200)
    fit = fit_temperature_map(rec, min_bucket_n=50)
    assert set(fit) == {"temperature", "temperature_by_options", "n_by_bucket", "temperature_clamped"}
    assert fit["n_by_bucket"] == {"choice:3-5": 200}
    report = fit_temperature_map(rec, compute_ece=True, seed=None)["report"]
    assert set(report) == {"ece_before", "ece_after", "n", "n_eval", "buckets_excluded_from_eval"}
    assert report["n"] == 200 and report["n_eval"] == 40
    few = fit_temperature_map(rec[:5], compute_ece=True)["report"]  # R-CAL-6: compute_ece always reports
    assert few["n"] == 5 and few["n_eval"] == 0 and set(few) == set(report)
    assert few["ece_before"] is None and few["ece_after"] is None  # nothing evaluated: no reading, not a perfect one
    for bad in (-1, 2 ** 32, 1.5, True, "1"):
        with pytest.raises(ValueError, match="seed"):
            fit_temperature_map(rec, seed=bad)
    sharp = [(0, np.array([2.0, 0.0, 0.0]) * s, np.eye(3)[0], 3) for s in (1, 2)] * 20  # always right: T -> min
    clamped = fit_temperature_map(sharp)["temperature_clamped"]
    assert clamped["temperature[0]"]["bound"] == "min" and clamped["temperature[0]"]["applied"] == 0.5


def test_save_writes_exactly_the_payload(tmp_path):
    from laya.calibrate import calibration_payload_for, read_calibration_json, write_calibration

    obj = agent_like(temperature=[1.5, 1.0, 2.0], binning_map={"choice:2": {"bins": 1, "values": [0.7]}})
    path = tmp_path / "cal.json"
    write_calibration(str(path), calibration_payload_for(obj))
    data = json.loads(path.read_text())
    assert data == {"version": 2, "temperature": [1.5, 1.0, 2.0], "temperature_by_options": {},
                    "model_id_or_path": "m", "subfolder": None, "config": {"max_len": 64},
                    "binning_map": {"choice:2": {"bins": 1, "values": [0.7]}}}
    other = agent_like()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_calibration_payload(other, read_calibration_json(str(path)))
    assert other.temperature == [1.5, 1.0, 2.0] and other.binning_map == data["binning_map"]


def test_records_from_labeled_match_predict(agent):
    from laya.calibrate import records_from_labeled

    questions = {"intent": {"type": "choice", "instructions": "What does the customer want?",
                            "criteria": ["refund", "bug", "other"], "option_order": [2, 0, 1]},
                 "urgent": {"type": "noul", "instructions": "Is it urgent?"},
                 "skipped": {"type": "noul", "instructions": "no target"}}
    pairs = [("I want my money back", questions, {"intent": [1.0, 0.0, 0.0], "urgent": [0.0, 1.0]}),
             ({"message": "the app crashes"}, questions, {"intent": [0.0, 1.0, 0.0]})]
    recs = records_from_labeled(agent, pairs)
    assert [(q, k) for q, _, _, k in recs] == [(0, 3), (2, 2), (0, 3)]
    assert list(recs[0][2]) == [1.0, 0.0, 0.0]
    answer = agent.predict("I want my money back", questions)["answers"]["intent"]
    z = np.asarray(recs[0][1]) / agent.temperature_by_options.get("choice:3-5", agent.temperature[0])
    p = np.exp(z - z.max())
    p /= p.sum()
    assert list(answer["probabilities"].values()) == pytest.approx(list(p), abs=1e-3)  # canonical order
    with pytest.raises(ValueError, match=r"pairs\[0\]"):
        records_from_labeled(agent, [("s", questions)])
    with pytest.raises(ValueError, match="target must be a nonnegative"):
        records_from_labeled(agent, [("s", questions, {"urgent": [0.5, 0.2]})])


def test_one_calibration_module():
    """Issue 22: the calibration file helpers live in laya.calibrate (laya/calibration.py is gone)."""
    import importlib.util

    assert importlib.util.find_spec("laya.calibration") is None
    assert cal.write_calibration and cal.read_calibration_json and cal.check_binning_map


def test_fuzzed_inputs_are_named_and_never_hang():
    from laya.calibrate import check_record, ece_score, fit_abstention_thresholds, fit_binning_map

    assert ece_score([0.5], [True], bins=10 ** 12) == 0.5  # occupied bins only: no walk over empty ones
    assert ece_score([0.5, 0.9, 0.1], [True, False, True], bins=15) == pytest.approx(0.7666666666666666)
    with pytest.raises(ValueError, match="^conf and correct must be the same length, got 2 and 1$"):
        ece_score([0.5, 0.6], [True])
    with pytest.raises(ValueError, match=r"k must be an integer between 1 and the vector length \(0\), got 0"):
        check_record((0, [], []))
    with pytest.raises(ValueError, match="logits must be a one-dimensional numeric vector"):
        check_record((0, [10 ** 400, 1], [0, 1]))  # an int too large for a float
    rec = records(120)
    for temperature in ([0, 0, 0], None, [float("nan"), 1, 1], [-1, 1, 1]):
        with pytest.raises(ValueError, match="^temperature must be 3 positive finite numbers"):
            fit_abstention_thresholds(rec, temperature, {})
    with pytest.raises(ValueError, match="^temperature_by_options must be a dict of bucket -> positive finite"):
        fit_binning_map(rec, [1, 1, 1], {"choice:3-5": 0}, min_bucket_n=10)
    with pytest.raises(ValueError, match="binning_map"):
        fit_abstention_thresholds(rec, [1, 1, 1], {}, binning_map={"choice:3-5": {"values": [7.0]}})
    with pytest.raises(ValueError, match="^bins must be at most 10000 for a binning map"):
        fit_binning_map(rec, [1, 1, 1], {}, bins=10 ** 9, min_bucket_n=10)
