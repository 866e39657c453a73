"""Agent's act softmax: float64 per row with math.exp (the arithmetic of laya.answers.softmax), as lists,
within fp32 rounding of the spec's `softmax(act_logits.float())`."""

import math
import random

import torch

from laya.agent import act_probabilities
from laya.answers import softmax


def reference(act_logits: torch.Tensor) -> list:
    """Row by row: laya.answers.softmax on the fp32 values; a row with a NaN or an infinite maximum is all
    NaN (the maximum propagates NaN, like np.maximum, and inf - inf is NaN; answers.softmax only ever sees
    finite logits)."""
    out = []
    for row in act_logits.float().tolist():
        if any(v != v for v in row) or math.isinf(max(row)):  # NaN in, or inf - inf at the maximum
            out.append([math.nan] * len(row))
        else:
            out.append(softmax(row))
    return out


def same(a: list, b: list) -> bool:
    return all(x == y or (math.isnan(x) and math.isnan(y)) for ra, rb in zip(a, b) for x, y in zip(ra, rb)) \
        and [len(r) for r in a] == [len(r) for r in b]


def random_logits(rng: random.Random, n: int, width: int) -> torch.Tensor:
    scale = rng.choice([0.01, 1.0, 10.0, 100.0, 1e4])
    return torch.tensor([[rng.gauss(0, scale) for _ in range(width)] for _ in range(n)], dtype=torch.float32)


def test_bitwise_the_answer_softmax_and_close_to_torch_fp32():
    rng = random.Random(7)
    for width in (2, 1, 3, 5):
        for _ in range(150):
            logits = random_logits(rng, rng.randint(1, 40), width)
            got = act_probabilities(logits)
            assert isinstance(got, list) and all(type(row) is list for row in got)
            assert got == reference(logits)
            spec = torch.softmax(logits.float(), dim=-1).double()  # spec 3.4: softmax(act_logits.float())
            assert torch.allclose(torch.tensor(got, dtype=torch.float64), spec, rtol=0, atol=1e-6)


def test_a_wrong_softmax_is_caught():
    logits = torch.tensor([[0.3, -1.2], [2.0, 0.5]])
    got = act_probabilities(logits)
    assert got != [[x * (1 + 1e-15) for x in row] for row in reference(logits)]
    assert got != [list(reversed(row)) for row in reference(logits)]


def test_special_values():
    inf, nan = float("inf"), float("nan")
    rows = [[0.0, 0.0], [-0.0, 0.0], [1.0, 1.0], [inf, 1.0], [1.0, inf], [-inf, -inf], [-inf, 2.0], [nan, 1.0],
            [1.0, nan], [nan, nan], [inf, inf], [3.4e38, -3.4e38], [88.0, -104.0]]
    logits = torch.tensor(rows, dtype=torch.float32)
    assert same(act_probabilities(logits), reference(logits))
    wide = torch.tensor([[1.0, nan, 0.0], [inf, 0.0, 1.0], [-inf, -inf, -inf], [3.4e38, 0.0, -3.4e38]])
    assert same(act_probabilities(wide), reference(wide))


def test_no_rows():
    assert act_probabilities(torch.zeros(0, 2)) == []


def test_other_dtypes_and_layouts():
    rng = random.Random(3)
    for width in (2, 3):
        base = torch.tensor([[rng.gauss(0, 3) for _ in range(width)] for _ in range(12)], dtype=torch.float32)
        for logits in (base.to(torch.bfloat16), base.to(torch.float16), base.double(), base.t().contiguous().t(),
                       base[::2], base[:1]):
            got = act_probabilities(logits)
            assert isinstance(got, list) and got == reference(logits)
