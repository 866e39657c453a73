"""Agent's act softmax: the two-logit fast path gives exactly the numpy float64 softmax it replaced."""

import math
import random

import numpy as np
import torch

from laya.agent import act_probabilities


def numpy_softmax(act_logits: torch.Tensor) -> list:
    act = act_logits.float().numpy().astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf
        act -= np.maximum.reduce(act, axis=-1, keepdims=True)
        np.exp(act, out=act)
        act /= np.add.reduce(act, axis=-1, keepdims=True)
    return act.tolist()


def same(a: list, b: list) -> bool:
    return all(x == y or (math.isnan(x) and math.isnan(y)) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) \
        and [len(r) for r in a] == [len(r) for r in b]


def test_two_logits_bitwise_equal_to_numpy():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(1, 40)
        scale = rng.choice([0.01, 1.0, 10.0, 100.0, 1e4])
        logits = torch.tensor([[rng.gauss(0, scale), rng.gauss(0, scale)] for _ in range(n)], dtype=torch.float32)
        got = act_probabilities(logits)
        assert isinstance(got, list) and got == numpy_softmax(logits)


def test_two_logits_special_values():
    inf, nan = float("inf"), float("nan")
    rows = [[0.0, 0.0], [-0.0, 0.0], [1.0, 1.0], [inf, 1.0], [1.0, inf], [-inf, -inf], [-inf, 2.0], [nan, 1.0],
            [1.0, nan], [nan, nan], [inf, inf], [3.4e38, -3.4e38], [88.0, -104.0]]
    logits = torch.tensor(rows, dtype=torch.float32)
    assert same(act_probabilities(logits), numpy_softmax(logits))


def test_other_widths_use_numpy():
    logits = torch.randn(5, 3)
    out = act_probabilities(logits)
    assert isinstance(out, np.ndarray) and out.tolist() == numpy_softmax(logits)


def test_two_logits_from_other_dtypes_and_layouts():
    rng = random.Random(3)
    base = torch.tensor([[rng.gauss(0, 3), rng.gauss(0, 3)] for _ in range(12)], dtype=torch.float32)
    for logits in (base.to(torch.bfloat16), base.to(torch.float16), base.double(), base.t().contiguous().t(),
                   base[::2], base[:1]):
        got = act_probabilities(logits)
        assert isinstance(got, list) and got == numpy_softmax(logits)
