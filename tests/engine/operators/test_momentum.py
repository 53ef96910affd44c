"""FISTA's momentum with the gradient restart (operators/momentum.py), the one rule of the
accelerated one-layer, joint and layer-wise feature-stage methods.

Checked against the defining relations, not against stored numbers: t_{k+1}^2 - t_{k+1} =
t_k^2 (Beck & Teboulle's sequence), coef_k = (t_k - 1) / t_{k+1} -> 1 like 1 - 3/k, and the
restart (coefficient 0, t back to 1, so the next coefficient is 0 too); the tensor and the
scalar forms against each other, and a warm start from ``state`` continuing the sequence.
The t-sequence alone is FGP's (the TV prox): its compiled twin gives the same floats.
"""

from __future__ import annotations

import math
import struct

import pytest
import torch

from lbi_engine.operators.momentum import Momentum, ScalarMomentum, next_t


def test_the_sequence_satisfies_its_recursion_and_the_coefficient_tends_to_one() -> None:
    rule = Momentum(3, torch.zeros(1, dtype=torch.float64))
    never = torch.zeros(3, dtype=torch.bool)
    t_prev = rule.t.clone()
    for _ in range(1, 200):
        coef = rule.advance(never).clone()
        t = rule.t
        torch.testing.assert_close(t * t - t, t_prev * t_prev, rtol=1e-14, atol=0)
        torch.testing.assert_close(coef, (t_prev - 1.0) / t, rtol=1e-14, atol=0)
        t_prev = t.clone()
    # t_k ~ (k + 2) / 2, so coef_k ~ 1 - 3 / k
    assert float(coef[0]) == pytest.approx(1.0 - 3.0 / 199, abs=2e-3)
    assert rule.restarts == 0


def test_a_restart_zeroes_this_and_the_next_coefficient_per_sample() -> None:
    rule = Momentum(2, torch.zeros(1, dtype=torch.float64))
    none = torch.tensor([False, False])
    for _ in range(5):
        rule.advance(none)
    before = rule.coef.clone()
    assert bool((before > 0).all())
    coef = rule.advance(torch.tensor([True, False])).clone()
    assert float(coef[0]) == 0.0 and float(coef[1]) > float(before[1])
    assert float(rule.t[0]) == 1.0
    coef = rule.advance(none)
    assert float(coef[0]) == 0.0 and float(coef[1]) > 0.0  # t = 1 gives coef 0 once more
    assert rule.restarts == 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_scalar_form_is_the_tensor_form_for_one_sample(dtype: torch.dtype) -> None:
    like = torch.zeros(1, dtype=dtype)
    tensor, scalar = Momentum(1, like), ScalarMomentum(dtype)
    pattern = [False] * 7 + [True] + [False] * 12 + [True, True] + [False] * 30
    for restart in pattern:
        a = float(tensor.advance(torch.tensor([restart]))[0])
        b = scalar.advance(restart)
        if dtype == torch.float64:
            assert a == b
        else:  # the scalar form rounds each result to float32, the tensor form computes in it
            assert b == struct.unpack("f", struct.pack("f", b))[0]
            assert a == pytest.approx(b, rel=4e-7)
    assert scalar.restarts == tensor.restarts == 3
    torch.testing.assert_close(scalar.state_on(like), tensor.state, rtol=4e-7, atol=0)


def test_a_warm_start_continues_the_sequence() -> None:
    like = torch.zeros(1, dtype=torch.float64)
    straight, first = Momentum(2, like), Momentum(2, like)
    steps = [torch.tensor([k % 9 == 4, k % 13 == 6]) for k in range(40)]
    for restart in steps:
        straight.advance(restart)
    for restart in steps[:17]:
        first.advance(restart)
    resumed = Momentum(2, like, first.state)
    for restart in steps[17:]:
        resumed.advance(restart)
    torch.testing.assert_close(resumed.state, straight.state, rtol=0, atol=0)


def test_the_compiled_t_rule_of_the_fgp_kernel_is_the_python_one_bit_for_bit() -> None:
    """The FGP kernel compiles ``next_t`` itself; its floats are the Python rule's and the
    textbook form's (1 + sqrt(1 + 4 t^2)) / 2, exactly, over a long sequence."""
    pytest.importorskip("numba")
    from lbi_engine.regularisers import _fgp_kernel

    t = 1.0
    for _ in range(500):
        following = next_t(t)
        assert following == (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
        assert _fgp_kernel._next_t(t) == following
        t = following
    assert t > 250.0  # t_k ~ (k + 2) / 2: the sequence was long enough to matter
