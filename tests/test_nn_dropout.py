"""blosa.nn.dropout: the CPU's cheaper mask is still Bernoulli(1 - p), independent, and scaled."""
from __future__ import annotations

import math
import random

import pytest
import torch

from blosa.nn.dropout import Dropout, dropout
from nn_helpers import fresh_seed


@pytest.mark.parametrize("p", [0.1, 0.25, 0.4, 0.5, 0.9])
def test_keep_rate_scale_and_independence(p):
    seed = fresh_seed()
    n = random.randint(200_000, 300_001)  # odd or even: the last draw half used
    y = dropout(torch.ones(n), p)
    dropped = y == 0
    sigma = math.sqrt(p * (1 - p) / n)
    # either word of a 64-bit draw, and both of one draw together (independent: p^2)
    for rate, want, count in ((dropped.double().mean(), p, n),
                              (dropped[0::2].double().mean(), p, (n + 1) // 2),
                              (dropped[1::2].double().mean(), p, n // 2),
                              ((dropped[0:n - 1:2] & dropped[1::2]).double().mean(), p * p, n // 2)):
        bound = 6 * math.sqrt(want * (1 - want) / count)
        assert abs(rate.item() - want) < bound, f"p={p}: rate {rate.item():.4f} vs {want} (seed={seed})"
    assert torch.allclose(y[~dropped], torch.full_like(y[~dropped], 1 / (1 - p))), seed
    assert sigma > 0


def test_gradient_is_the_mask_scaled_and_eval_is_identity():
    seed = fresh_seed()
    x = torch.randn(64, 33, requires_grad=True)
    y = dropout(x, 0.3)
    y.sum().backward()
    kept = y != 0
    assert torch.allclose(x.grad, kept.float() / 0.7), seed
    layer = Dropout(0.3).eval()
    assert layer(x) is x
    assert dropout(x, 0.0) is x


def test_each_call_and_each_slice_of_an_expanded_input_draws_anew():
    fresh_seed()
    x = torch.ones(100, 50)
    a, b = dropout(x, 0.5), dropout(x, 0.5)
    assert not torch.equal(a, b)
    both = dropout(x.expand(2, 100, 50), 0.5)
    assert not torch.equal(both[0], both[1])


def test_the_seed_reproduces_the_mask():
    torch.manual_seed(3)
    a = dropout(torch.ones(1000), 0.4)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(torch.ones(1000), 0.4))
