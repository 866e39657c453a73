"""laya.calibrate: ECE, temperature fits, per-bucket maps, binning and abstention thresholds."""

from __future__ import annotations

import numpy as np
import pytest

from laya.calibrate import (ece_score, fit_abstention_thresholds, fit_binning_map, fit_one_temperature,
                            fit_temperature_map, predictions)


def test_ece_by_hand():
    # bins=2: (0, .5] holds 0.2 and 0.4 (acc 0.5, conf 0.3), (.5, 1] holds 0.9 and 1.0 (acc 1, conf 0.95)
    conf = [0.2, 0.4, 0.9, 1.0]
    correct = [True, False, True, True]
    assert ece_score(conf, correct, bins=2) == pytest.approx(0.5 * 0.2 + 0.5 * 0.05)
    assert ece_score([0.0], [False], bins=15) == 0.0  # 0 falls in the first (closed) bin
    assert ece_score([], [], bins=3) == 0.0
    for bad in (0, 2.5, True, "15"):
        with pytest.raises(ValueError, match="bins"):
            ece_score(conf, correct, bins=bad)


def synthetic(true_t: float, n: int, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Logits whose labels are drawn from softmax(z / true_t): the NLL-optimal temperature is true_t."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        z = rng.normal(0, 3.0, size=k)
        p = np.exp(z / true_t - (z / true_t).max())
        p /= p.sum()
        pairs.append((z, np.eye(k)[rng.choice(k, p=p)]))
    return pairs


@pytest.mark.parametrize("true_t", [0.7, 2.0, 3.5])
def test_temperature_fit_recovers_known_temperature(true_t):
    fitted = fit_one_temperature(synthetic(true_t, 4000, 4), min_n=100)
    assert fitted == pytest.approx(true_t, rel=0.1)


def test_temperature_fit_floor_and_clamp():
    assert fit_one_temperature(synthetic(2.0, 50, 3), min_n=2000) == 1.0  # too few pairs
    assert fit_one_temperature(synthetic(20.0, 3000, 3), min_n=100) == 5.0  # clamped to the runtime range
    assert fit_one_temperature(synthetic(0.05, 3000, 3), min_n=100) == 0.5


def test_temperature_map_types_buckets_and_ece():
    records = [(0, z, t, 4) for z, t in synthetic(2.0, 600, 4, seed=1)]
    records += [(2, z, t, 2) for z, t in synthetic(0.8, 600, 2, seed=2)]
    fit = fit_temperature_map(records, compute_ece=True, min_bucket_n=300)
    assert fit["temperature"][0] == pytest.approx(2.0, rel=0.2)
    assert fit["temperature"][1] == 1.0  # no score records
    assert fit["temperature"][2] == pytest.approx(0.8, rel=0.2)
    assert set(fit["temperature_by_options"]) == {"choice:3-5", "noul:2"}
    assert fit["report"]["n_eval"] == 240 and fit["report"]["n"] == 1200  # compat-0.4.15 R-CAL-6 keys
    assert fit["report"]["ece_after"] < fit["report"]["ece_before"]


def test_binning_and_abstention():
    records = [(0, z, t, 3) for z, t in synthetic(1.0, 400, 3, seed=3)]
    binning = fit_binning_map(records, [1.0, 1.0, 1.0], {}, bins=5, min_bucket_n=200)
    assert list(binning) == ["choice:3-5"] and binning["choice:3-5"]["bins"] == 5
    assert all(0.0 <= v <= 1.0 for v in binning["choice:3-5"]["values"])
    thresholds = fit_abstention_thresholds(records, [1.0, 1.0, 1.0], {}, target_error=0.1, min_bucket_n=100,
                                           conservative=False)
    conf, correct = predictions(records)
    kept = conf >= thresholds["choice:3-5"]
    assert 0 < kept.sum() < len(records)
    assert (~correct[kept]).mean() <= 0.1 + 1e-9
    assert list(thresholds) == ["choice:3-5"]  # compat-0.4.15 R-CAL-5: no "default" key
    assert fit_abstention_thresholds(records[:5], [1.0] * 3, {}) == {}  # below min_bucket_n


def test_write_calibration_gives_the_file_the_umask_permissions(tmp_path):
    # a saved calibration must be as readable as any file the user writes (mkstemp made it 0600)
    import os

    from laya.calibrate import write_calibration

    old = os.umask(0o022)
    try:
        write_calibration(str(tmp_path / "sub" / "calibration.json"), {"a": 1})
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "calibration.json"
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert path.read_text(encoding="utf-8") == '{\n  "a": 1\n}'
    assert os.listdir(tmp_path / "sub") == ["calibration.json"]
