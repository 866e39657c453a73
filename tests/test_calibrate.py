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


def _with_umask(mask, fn):
    import os

    old = os.umask(mask)
    try:
        return fn()
    finally:
        os.umask(old)


def test_write_calibration_gives_a_new_file_the_umask_permissions(tmp_path):
    from laya.calibrate import write_calibration

    path = tmp_path / "sub" / "calibration.json"
    _with_umask(0o027, lambda: write_calibration(str(path), {"a": 1}))
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert path.read_text(encoding="utf-8") == '{\n  "a": 1\n}'
    assert [p.name for p in path.parent.iterdir()] == ["calibration.json"]


def test_write_json_atomic_keeps_a_replaced_files_mode_and_survives_a_failed_write(tmp_path):
    import os

    from laya.atomic_file import write_json_atomic

    path = tmp_path / "rl_agent_config.json"
    path.write_text("{}")
    os.chmod(path, 0o600)
    _with_umask(0o002, lambda: write_json_atomic(str(path), {"b": 2}))
    assert oct(path.stat().st_mode & 0o777) == oct(0o600) and path.read_text() == '{"b": 2}'
    with pytest.raises(TypeError):
        write_json_atomic(str(path), {"c": object()})
    assert path.read_text() == '{"b": 2}' and [p.name for p in tmp_path.iterdir()] == ["rl_agent_config.json"]
    long = tmp_path / ("x" * 240 + ".json")  # a name the file system takes must not fail for the temp file's sake
    write_json_atomic(str(long), [1])
    assert long.read_text() == "[1]"
